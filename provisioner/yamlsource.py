"""Reading profile YAML with line numbers, and resolving ``extends:``.

A profile is loaded with ruamel.yaml's round-trip loader so that every key keeps its line.
``extends`` is resolved relative to the child file or on ``TRAINVM_PROFILE_PATH``; documents are
deep-merged (child wins, lists replaced) and every resulting field remembers the file and line
that set it, so errors point at the right place even across a profile repo.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from provisioner import settings
from provisioner.bundled import profiles_dir
from provisioner.cache import cached_bytes
from provisioner.errors import InputError, ProfileError
from provisioner.inputfile import MAX_PROFILE_BYTES, read_capped
from provisioner.messages import Message

Path_ = tuple[str | int, ...]
MAX_DEPTH = 16
MAX_ALIASES = 100  # YAML alias uses per file
MAX_VALUES = 100_000  # values in a file once its aliases are expanded (an alias bomb expands exponentially)
MAX_REF = 255  # characters in an ``extends`` reference
MAX_FLOW_DEPTH = 64


@dataclass
class Located:
    """Plain data plus ``{field path: (file, line)}`` for every key and list item in it."""

    data: dict[str, Any]
    lines: dict[Path_, tuple[str, int]] = field(default_factory=dict)
    files: tuple[str, ...] = ()

    def where(self, path: Path_) -> tuple[str | None, int | None]:
        """The file and line of ``path``, or of its nearest ancestor that has one."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return (self.files[-1] if self.files else None, 1)


def _plain(node: Any, file: str, path: Path_, lines: dict[Path_, tuple[str, int]], budget: list[int] | None = None) -> Any:
    """Plain dicts/lists/str/int/float/bool/None (ruamel's HexInt, ScalarFloat... become int/float), at most
    ``MAX_VALUES`` of them; strings must be valid Unicode (no lone surrogates from ``\\ud800`` escapes)."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq  # lazy: startup

    budget = budget if budget is not None else [MAX_VALUES]
    budget[0] -= 1
    if budget[0] < 0:
        raise _located_input(file, None, "", f"the document expands to more than {MAX_VALUES} values (YAML aliases?)")
    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if not isinstance(key, str):
                raise _located_input(file, _key_line(node, key), ".".join(map(str, path)), f"key {key!r} must be a string")
            _unicode(key, file, _key_line(node, key), path)
            lines[path + (key,)] = (file, _key_line(node, key))
            out[key] = _plain(value, file, path + (key,), lines, budget)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, value in enumerate(node):
            try:
                lines[path + (i,)] = (file, node.lc.item(i)[0] + 1)
            except (KeyError, AttributeError, TypeError):
                pass
            items.append(_plain(value, file, path + (i,), lines, budget))
        return items
    if node is None or isinstance(node, bool):
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return _unicode(str(node), file, lines.get(path, (file, None))[1], path)
    # dates, timestamps and other YAML types are passed as their text so the model rejects them clearly
    return str(node)


def _unicode(text: str, file: str, line: int | None, path: Path_) -> str:
    bad = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:
        raise _located_input(file, line, ".".join(map(str, path)), f"contains a lone surrogate (\\u{ord(bad):04x}), "
                             "which is not a character; remove the escape")
    return text


def _key_line(node: Any, key: Any) -> int:
    try:
        return node.lc.key(key)[0] + 1
    except (KeyError, AttributeError, TypeError):
        return node.lc.line + 1


def _located_input(file: str, line: int | None, path: str, msg: str) -> InputError:
    where = f"{file}:{line}: " if line else f"{file}: "
    return InputError(f"{where}{path + ': ' if path else ''}{msg}")


ALIAS_USE = re.compile(r"(?<![\w\"'*])\*[A-Za-z0-9_.-]+")


def _check_shape(text: str, file: str) -> None:
    """Before parsing: at most ``MAX_ALIASES`` alias uses and flow nesting at most ``MAX_FLOW_DEPTH`` deep (the
    YAML parser slows down sharply on deep ``[[[[`` nesting). Counted on the raw text: an upper bound."""
    aliases = len(ALIAS_USE.findall(text))
    if aliases > MAX_ALIASES:
        raise _located_input(file, None, "", f"uses {aliases} YAML aliases (*name); at most {MAX_ALIASES} are allowed")
    depth = deepest = 0
    for c in text:
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(0, depth - 1)
    if deepest > MAX_FLOW_DEPTH:
        raise _located_input(file, None, "", f"nests [ ] / {{ }} {deepest} levels deep; at most {MAX_FLOW_DEPTH} are allowed")


#: parsed profiles kept in the cache (a few KB each); the oldest go first
CACHED_PROFILES = 256


def read_yaml(path: Path, label: str | None = None) -> Located:
    """Parse one YAML file into plain data with line numbers. Unreadable or unparsable: exit 2.
    ``label`` names the file in messages (a team source file: ``team@1c7f5440e031:base/x.yaml``).
    The result is a function of the file's name and bytes (and ruamel.yaml's version): it comes from the
    parsed-data cache when those are unchanged, so a plan of an unchanged profile never imports ruamel.yaml."""
    file = label or str(path)
    raw = read_capped(path, MAX_PROFILE_BYTES, "profile file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{file}: is not UTF-8 text (byte {exc.start}); a profile is a YAML text file") from None
    _check_shape(text, file)
    return cached_bytes("profile", [file.encode("utf-8", "surrogatepass"), raw, _ruamel_stamp()],
                        lambda: _parse(text, file), keep=CACHED_PROFILES)


def _ruamel_stamp() -> bytes:
    """ruamel.yaml's ``__init__`` (it holds the version), without importing it: part of the cache key."""
    try:
        spec = find_spec("ruamel.yaml")
        return Path(spec.origin).read_bytes() if spec and spec.origin else b"?"
    except (ImportError, OSError, ValueError):
        return b"?"


def _parse(text: str, file: str) -> Located:
    from ruamel.yaml import YAML  # lazy: startup
    from ruamel.yaml.error import MarkedYAMLError, YAMLError  # lazy: startup

    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        doc = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = " ".join(str(x) for x in (exc.context, exc.problem) if x).strip() or "invalid YAML"
        raise _located_input(file, line, "", f"YAML syntax error: {problem}") from None
    except YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid YAML"
        raise _located_input(file, None, "", f"YAML error: {first}") from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise _located_input(file, None, "", f"YAML error: {exc}") from None
    if doc is None:
        raise _located_input(file, 1, "", "the file is empty; a profile is a YAML mapping")
    from ruamel.yaml.comments import CommentedMap  # lazy: startup

    if not isinstance(doc, CommentedMap):
        raise _located_input(file, 1, "", f"a profile is a YAML mapping (key: value lines), not {yaml_kind(doc)}")
    lines: dict[Path_, tuple[str, int]] = {}
    try:
        data = _plain(doc, file, (), lines)
    except RecursionError:
        raise _located_input(file, None, "", "the document is nested too deeply") from None
    return Located(data, lines, (file,))


def search_path() -> list[Path]:
    raw = settings.text("TRAINVM_PROFILE_PATH")
    return [Path(p) for p in raw.split(os.pathsep) if p]


def _candidates(ref: str, base_dir: Path) -> Iterator[Path]:
    names = [ref] if ref.endswith((".yaml", ".yml")) else [ref + ".yaml", ref + ".yml", ref]
    for folder in [base_dir, *search_path()]:
        for n in names:
            yield folder / n
    for n in names:
        yield profiles_dir() / n


def resolve_ref(ref: str, child: Path) -> Path:
    if len(ref) > MAX_REF or any(ord(c) < 32 or ord(c) == 127 for c in ref):
        raise LookupError(f"not a profile name or path (at most {MAX_REF} printable characters)")
    for cand in _candidates(ref, child.parent):
        try:
            if cand.is_file():
                return _absolute(cand)
        except (OSError, ValueError):  # a name too long for the file system, or a loop
            continue
    searched = [str(child.parent)] + [str(p) for p in search_path()]
    raise LookupError(
        f"parent profile {ref!r} not found (looked in {', '.join(searched)} and the bundled profiles; "
        "set TRAINVM_PROFILE_PATH to your team's profile repo)"
    )


def merge(parent: Located, child: Located) -> Located:
    """Deep merge: mappings merge key by key, the child wins, lists and scalars are replaced."""
    lines = dict(parent.lines)

    def walk(p: Any, c: Any, path: Path_) -> Any:
        if isinstance(p, dict) and isinstance(c, dict):
            out = dict(p)
            for key, value in c.items():
                out[key] = walk(p.get(key), value, path + (key,))
                if path + (key,) in child.lines:
                    lines[path + (key,)] = child.lines[path + (key,)]
            return out
        # replaced: drop the parent's locations under this path, take the child's. Only containers have
        # locations below them: a scalar replaced or added (10,000 env entries) costs O(1), not a scan.
        n = len(path)
        if isinstance(p, (dict, list)):
            for k in [k for k in lines if len(k) > n and k[:n] == path]:
                del lines[k]
        if isinstance(c, (dict, list)):
            lines.update({k: v for k, v in child.lines.items() if len(k) > n and k[:n] == path})
        if path in child.lines:
            lines[path] = child.lines[path]
        return c

    data = walk(parent.data, child.data, ())
    return Located(data, lines, parent.files + child.files)


def _absolute(path: Path) -> Path:
    """``path.resolve()``; a path that cannot be resolved (a symlink loop, a name too long) is the input error
    that reading it gives."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        read_capped(path, MAX_PROFILE_BYTES, "profile file")  # raises the clear error
        return Path(os.path.abspath(path))


def load_resolved(path: Path, sources: Any = None) -> Located:
    """Read ``path`` and every ancestor it extends; return the merged document. ``sources`` (a
    ``provisioner.lock.sources.SourceResolver``) resolves ``NAME:path`` refs through team sources."""
    chain: list[Located] = []
    seen: list[str] = []
    current = path
    while True:
        key = str(_absolute(current))
        if key in seen:
            cycle = " -> ".join(seen[seen.index(key):] + [key])
            raise ProfileError([Message("extends", f"extends cycle: {cycle}", file=str(current), line=1)])
        seen.append(key)
        if len(seen) > MAX_DEPTH:
            raise ProfileError([Message("extends", f"extends chain deeper than {MAX_DEPTH} levels", file=str(path))])
        doc = read_yaml(current, sources.label(current) if sources is not None else None)
        chain.append(doc)
        ref = doc.data.get("extends")
        if ref is None:
            break
        file, line = doc.where(("extends",))
        if not isinstance(ref, str) or not ref.strip():
            raise ProfileError([Message("extends", "must be a profile path or name", file=file, line=line)])
        try:
            via_source = sources.resolve(ref, file, line) if sources is not None else None
            current = via_source if via_source is not None else resolve_ref(ref, current)
        except LookupError as exc:
            raise ProfileError([Message("extends", str(exc), file=file, line=line)]) from None
    merged = chain[-1]
    for doc in reversed(chain[:-1]):
        merged = merge(merged, doc)
    merged.data.pop("extends", None)
    merged.data["extends"] = chain[0].data.get("extends")
    return merged


def yaml_kind(value: object) -> str:
    """What a YAML value is, in the words of the YAML a user wrote ("a list"), not Python's ("CommentedSeq")."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "a date" if type(value).__name__ in ("date", "datetime", "TimeStamp") else "a value of another kind"
