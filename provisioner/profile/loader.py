"""``load_profile``: YAML (+ extends) -> validated, frozen ``Profile`` with located messages and
its canonical hash. Schema problems and compatibility errors raise ``ProfileError``; warnings
travel with the result."""

from __future__ import annotations

import difflib
import errno
import hashlib
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, ValidationError

from provisioner.canonical import canonical_json
from provisioner.catalog.families import usable_memory_notes
from provisioner.compat.rules import check_stack
from provisioner.errors import InputError, ProfileError
from provisioner.inputfile import read_capped
from provisioner.lock import lock_path_for
from provisioner.lock.sources import SourceResolver
from provisioner.profile.messages import Message
from provisioner.profile.model import Profile
from provisioner.profile.resolved import resolve
from provisioner.providers.registry import HASHED_DEFAULT_CLOUDS
from provisioner.secrets import find_secret, redact
from provisioner.yamlsource import Located, load_resolved, yaml_kind

if TYPE_CHECKING:  # the model is imported lazily at run time
    from provisioner.lock.model import LockFile
    from provisioner.lock.sources import UsedSource
    from provisioner.profile.model import Profile
    from provisioner.profile.resolved import Resolved

#: (path) -> (file, line) of a field where the profile (or a profile it extends) sets it (``Located.where``)
Locate = Callable[[tuple[str | int, ...]], tuple[str | None, int | None]]

#: Left out of the profile hash (the VM's identity): ``extends`` (resolved away) and how far `up` may fail
#: over (a policy of `up`, not a property of the VM; leaving it out keeps existing VMs' names stable).
HASH_EXCLUDE: dict[str, Any] = {"extends": True, "placement": {"max_failover_premium", "compact"}}
MAX_LOCK_BYTES = 8_000_000  # a bound on a hostile file, not on what a VM can take: the lock travels in the payload
_UNION_TAG = re.compile(r"^(function-[a-z]+\[.*\]|[a-z]+\[.*\])$")


@dataclass(frozen=True)
class LoadedProfile:
    """The record a command builds once and passes down: the profile, its hash, lock and sources, where each field
    was written, and (``resolved``) everything derived from it (profile/resolved.py)."""

    profile: Profile
    path: Path
    hash: str  # sha256 hex of the canonical JSON
    warnings: tuple[Message, ...]
    requirements_path: Path | None
    files: tuple[str, ...]
    lock: LockFile | None = None  # when NAME.lock exists next to the profile
    lock_path: Path | None = None
    lock_state: str = "none"  # none | fresh | stale (the profile changed since `trainvm lock`)
    sources: tuple[UsedSource, ...] = ()  # team sources the profile extends
    #: every secret:// reference outside data[].credential (stack.env values): (field and file:line, reference)
    secret_refs: tuple[tuple[str, str], ...] = ()
    #: (path) -> (file, line) of a field where the profile (or a profile it extends) sets it, from the one YAML read
    locate: Locate | None = None

    @cached_property
    def resolved(self) -> Resolved:
        """Everything derived from the profile, computed once (``profile.resolved.resolve``); ``load_profile``
        fills it while checking compatibility."""
        return resolve(self.profile)

    def where(self, path: tuple[str | int, ...]) -> tuple[str | None, int | None]:
        """(file, line) where ``path`` is set, from the first read of the YAML ((None, None) when unknown)."""
        return self.locate(path) if self.locate is not None else (None, None)


def _loc_path(loc: tuple[Any, ...]) -> tuple[tuple[str | int, ...], str]:
    clean: list[str | int] = []
    for part in loc:
        if isinstance(part, str) and _UNION_TAG.match(part):
            continue  # pydantic union-branch tags such as "list[str]" or "function-after[...]"
        clean.append(part)
    text = ""
    for part in clean:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return tuple(clean), text


def _schema_messages(exc: ValidationError, doc: Located) -> list[Message]:
    out: list[Message] = []
    seen: set[tuple[str, str]] = set()
    for err in exc.errors(include_url=False):
        path, text = _loc_path(tuple(err["loc"]))
        kind = err["type"]
        msg = str(err["msg"])
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if kind == "extra_forbidden":
            msg = f"unknown key{_did_you_mean(Profile, path)}"
        elif kind == "missing":
            msg = "required field is missing"
        elif kind in ("float_type", "float_parsing", "int_type") and _huge(err.get("input")):
            msg = f"far too large ({_short(err.get('input'))})"
        elif kind in ("float_parsing", "int_parsing", "bool_parsing"):
            msg = _yaml_words(msg) + f" (got {yaml_kind(err.get('input'))}: {_short(err.get('input'))})"
        elif kind in ("string_type", "int_type", "float_type", "bool_type", "dict_type", "list_type", "model_type", "model_attributes_type", "tuple_type"):
            msg = _yaml_words(msg) + f" (got {yaml_kind(err.get('input'))}: {_short(err.get('input'))})"
        if (text, msg) in seen:
            continue
        seen.add((text, msg))
        file, line = doc.where(path)
        out.append(Message(text, redact(msg), file=file, line=line))
    return out


_PYDANTIC_KINDS = {"a valid dictionary": "a mapping", "a valid list": "a list", "a valid string": "a string",
                   "a valid integer": "a whole number", "a valid number": "a number", "a valid boolean": "true or false",
                   "a valid tuple": "a list"}


def _yaml_words(msg: str) -> str:
    """pydantic's "Input should be a valid dictionary" in the words of YAML ("Input should be a mapping")."""
    msg = re.sub(r" or instance of \w+", "", msg)  # "a valid dictionary or instance of Hardware": a class name
    msg = re.sub(r", unable to parse string as an? \w+$", "", msg)
    for python, yaml in _PYDANTIC_KINDS.items():
        msg = msg.replace(python, yaml)
    return msg


def _huge(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200


def _short(value: Any) -> str:
    if _huge(value):
        # never repr() it: Python refuses to print an integer of more than 4,300 digits (ValueError)
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    what = find_secret(text)
    if what:  # never repeated, not even cut short: a cut secret no longer looks like one to redact()
        return f"a value that looks like {what}, not repeated here"
    return text if len(text) <= 60 else text[:57] + "..."


def _did_you_mean(model: Any, path: tuple[str | int, ...]) -> str:
    current = model
    for part in path[:-1]:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if isinstance(current, type) and issubclass(current, BaseModel) else None
        if field is None:
            return ""
        ann = field.annotation
        inner = getattr(ann, "__args__", None)
        candidates = [ann, *(inner or ())]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if current is None:
            return ""
    if not path or not (isinstance(current, type) and issubclass(current, BaseModel)):
        return ""
    allowed = list(current.model_fields)
    close = difflib.get_close_matches(str(path[-1]), allowed, n=1)
    return f"; did you mean {close[0]!r}?" if close else f" (allowed: {', '.join(allowed)})"


def profile_hash(profile: Any, requirements_sha256: str | None = None, lock_sha256: str | None = None) -> str:
    """sha256 of the resolved profile's canonical JSON (defaults applied, ``extends`` dropped; a
    ``placement.clouds`` the profile does not write is hashed as ``HASHED_DEFAULT_CLOUDS``, whatever
    the default set is today),
    with the lock file's content hash in place of its path, so the hash changes only when what
    gets installed changes. A ``trainvm lock`` file (NAME.lock) is covered the same way."""
    # perf unset leaves the hash of every profile written before it existed unchanged
    exclude = {**HASH_EXCLUDE, **({"perf": True} if getattr(profile, "perf", None) is None else {})}
    data = profile.model_dump(mode="json", exclude=exclude)
    for key in ("idle_gpu_util_percent", "idle_gpu_minutes"):  # the stalled-GPU rule, unset: the hash from before it
        if key not in profile.lifecycle.model_fields_set:
            data["lifecycle"].pop(key, None)
    for item in data.get("data", []):  # data[].size_gib only feeds the egress estimate; an unset credential
        item.pop("size_gib", None)     # leaves the hash as it was before the field existed
        if item.get("credential") is None:
            item.pop("credential", None)
    if "clouds" not in profile.placement.model_fields_set:  # defaulted: the frozen spelling, not today's default set
        data["placement"]["clouds"] = list(HASHED_DEFAULT_CLOUDS)
    if data["hardware"].get("nodes") == 1:  # one node: the hash of every profile written before nodes existed
        data["hardware"].pop("nodes")
    for key in ("container", "python"):  # absent alternatives leave the hash of existing profiles unchanged
        if data["stack"].get(key) is None:
            data["stack"].pop(key, None)
    if requirements_sha256:
        data["stack"]["requirements"] = f"sha256:{requirements_sha256}"
    if lock_sha256:
        data["lock"] = f"sha256:{lock_sha256}"
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


def _requirements(profile: Any, doc: Located) -> tuple[Path | None, str | None, list[Message]]:
    rel = profile.stack.requirements
    if rel is None:
        return None, None, []
    file, line = doc.where(("stack", "requirements"))
    path = (Path(file).parent if file else Path.cwd()) / rel
    shown = rel if len(rel) <= 80 else rel[:77] + "..."
    try:
        path.lstat()
    except FileNotFoundError:
        return None, None, [Message("stack.requirements", f"lock file {shown} not found next to {file}", file=file, line=line)]
    except OSError as exc:  # a name longer than the file system allows (ENAMETOOLONG), a folder that cannot be read
        reason = ("the name is too long for the file system" if exc.errno == errno.ENAMETOOLONG
                  else f"cannot be read ({exc.strerror or exc})")
        return None, None, [Message("stack.requirements", f"lock file {shown}: {reason}", file=file, line=line)]
    try:  # a regular file under the cap, checked before reading
        content = read_capped(path, MAX_LOCK_BYTES, "lock file")
    except InputError as exc:
        return None, None, [Message("stack.requirements", f"{rel}: {str(exc).split(': ', 1)[-1]} (trainvm reads lock "
                                    f"files of at most {MAX_LOCK_BYTES:,} bytes)", file=file, line=line)]
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None, None, [Message("stack.requirements", f"{rel} is not UTF-8 text", file=file, line=line)]
    if "\x00" in text or any(not (c.isprintable() or c in "\n\r\t") for c in text):
        return None, None, [Message("stack.requirements", f"{rel} contains control characters", file=file, line=line)]
    for number, ln in enumerate(text.splitlines(), 1):
        what = find_secret(ln, guess=False)  # lock files hold digests: formats only
        if what:
            return None, None, [Message("stack.requirements", f"{rel}:{number}: looks like {what}; credentials never go into a "
                                        "lock file (it is sent to the VM): configure the index with a secret on the VM, or a "
                                        "public mirror", file=file, line=line)]
    reqs = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "--hash", "\\"))]
    if "--hash=sha256:" not in text:
        return None, None, [Message("stack.requirements", f"{rel} has no --hash=sha256: entries; generate it with `uv pip compile --generate-hashes` or `pip-compile --generate-hashes`", file=file, line=line)]
    bad = [ln.strip() for ln in reqs if "==" not in ln and not ln.lstrip().startswith("-")]
    if bad:
        return None, None, [Message("stack.requirements", f"{rel}: every requirement must be pinned with == ({bad[0]!r} is not)", file=file, line=line)]
    return path, hashlib.sha256(content).hexdigest(), []


def load_profile(path: str | Path, *, compat: bool = True, upgrade: bool = False, frozen: bool | None = None,
                 refresh: bool = False) -> LoadedProfile:
    """Load, resolve ``extends``, validate the schema and (by default) the compatibility rules."""
    path = Path(path)
    lock_path = lock_path_for(path)
    lock = None
    if os.path.lexists(lock_path):  # also a FIFO, a device or a symlink loop: read_lock refuses them (exit 2)
        from provisioner.lock.model import read_lock  # lazy: startup

        lock = read_lock(lock_path)
    resolver = SourceResolver.for_profile(path, lock, upgrade=upgrade, frozen=frozen, refresh=refresh)
    doc = load_resolved(path, resolver)
    resolver.finish(doc.files)
    try:
        profile = Profile.model_validate(doc.data)
    except ValidationError as exc:  # every independent problem in one run (one_round.py)
        from provisioner.profile.one_round import compat_of_what_parsed, env_secrets  # lazy: startup

        secrets = env_secrets(doc)
        schema = [m for m in _schema_messages(exc, doc)
                  if not (secrets and m.path == "stack.env" and "secrets never go into a profile" in m.message)]
        raise ProfileError(schema + secrets + (compat_of_what_parsed(exc, doc, _loc_path) if compat else [])) from None
    # the record first (the compat rules read its stack context: derived once), then what the loader derives itself
    record = resolve(profile) if compat else None
    req_path, req_sha, req_errors = _requirements(profile, doc)
    messages: list[Message] = list(req_errors) + list(resolver.messages)
    lock_state, lock_sha = "none", None
    if lock is not None:
        from provisioner.lock.model import file_sha256, inputs_sha256  # lazy: startup

        if req_path is not None:
            file, line = doc.where(("stack", "requirements"))
            messages.append(Message("stack.requirements", f"both a hand-written lock ({profile.stack.requirements}) and {lock_path.name} exist; remove one", file=file, line=line))
        lock_sha = file_sha256(lock_path)
        lock_state = "fresh" if lock.inputs_sha256 == inputs_sha256(profile, resolver.inputs()) else "stale"
    if record is not None:
        known = (record.container_facts, record.container_notes) if record.image is not None else None
        for m in check_stack(profile.stack, profile.hardware, ctx=record.stack, known=known):
            file, line = doc.where(_split_path(m.path))
            messages.append(m.located(file, line))
    hw = profile.hardware
    notes = usable_memory_notes(hw.min_gpu_memory_gib, hw.gpu)
    if notes:  # min_gpu_memory_gib compares nominal sizes: say so where a GPU it admits has less usable memory
        file, line = doc.where(("hardware", "min_gpu_memory_gib"))
        messages.append(Message("hardware.min_gpu_memory_gib", "compared with nominal memory: " + "; ".join(notes)
                                + " (name GPUs with more, or raise it)", level="warning", file=file, line=line))
    errors = [m for m in messages if m.level == "error"]
    if errors:
        raise ProfileError(messages)
    loaded = LoadedProfile(
        profile=profile,
        path=path,
        hash=profile_hash(profile, req_sha, lock_sha),
        warnings=tuple(messages),
        requirements_path=req_path,
        files=doc.files,
        lock=lock,
        lock_path=lock_path if lock is not None else None,
        lock_state=lock_state,
        sources=tuple(resolver.used),
        secret_refs=tuple((f"{text} ({_where(doc, path)})", ref) for path, text, ref in secret_references(profile)),
        locate=doc.where,
    )
    if record is not None:
        loaded.__dict__["resolved"] = record  # the cached property, already computed above
    return loaded


def secret_references(profile: Any) -> list[tuple[tuple[str | int, ...], str, str]]:
    """(path, dotted path, reference) of every ``secret://`` string in the profile except ``data[].credential``
    (the data-locality rule covers those): today the secret ``stack.env`` values, and any field added later."""
    out: list[tuple[tuple[str | int, ...], str, str]] = []

    def walk(node: Any, path: tuple[str | int, ...]) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))
        elif isinstance(node, str) and node.startswith("secret://"):
            if not (len(path) == 3 and path[0] == "data" and path[2] == "credential"):
                out.append((path, _loc_path(path)[1], node))

    walk(profile.model_dump(mode="json"), ())
    return out


def _where(doc: Located, path: tuple[str | int, ...]) -> str:
    file, line = doc.where(path)
    return f"{file}:{line}" if file and line else (file or "the profile")


def _split_path(text: str) -> tuple[str | int, ...]:
    out: list[str | int] = []
    for part in text.replace("]", "").replace("[", ".").split("."):
        if part:
            out.append(int(part) if part.isdigit() else part)
    return tuple(out)
