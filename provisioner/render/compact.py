"""Compaction of the startup script for AWS user data (16,384 bytes after gzip): the same program
without comments, blank lines and indentation, and with the embedded Python minified.

Compaction never sees profile values: ``render_script`` renders the header, the configuration
block (every profile value, quoted by ``shq``) and the body separately and compacts only the
header and the body (see ``provisioner/render/script.py``), so no marker has to be searched for
in text that a user could have written. The body's only profile values are inside heredocs that
are kept byte for byte (``trainvm-run`` of container stacks).

- shell outside heredocs: comment-only and blank lines dropped (the ``#!`` line kept), leading
  blanks and trailing ``  # comment`` removed where the ``#`` cannot be inside a string;
- quoted heredocs whose delimiter ends in ``_PY``: the Python program minified through ``ast``
  (docstrings and comments gone, one space per indentation level), checked to parse to the same
  tree, else kept as it was;
- heredocs whose delimiter ends in ``_SH`` (verbatim shell programs): full-line comments and
  blank lines dropped, the ``#!`` line kept;
- every other heredoc byte for byte.
"""

from __future__ import annotations

import ast
import re

# Functions of the embedded Python that are looked up by name at run time; compaction keeps only
# those the profile needs (render/script.py python_keep): the helper's secret readers (secret_KIND),
# data-credential code (cred_*) and lifecycle API call (api_CLOUD), the copier's schemes (scheme_gs, scheme_s3, scheme_az).
DYNAMIC_PREFIXES = ("secret_", "cred_", "api_", "scheme_")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(TRAINVM_[A-Z_]+)\1")
# A function header's trailing comment: `name() {  # what it does`.
_FUNC_COMMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*\(\) \{)\s+#.*$")
_TRAILING = re.compile(r"\s{2,}# [^'\"`$\\]*$")


def _drop_trailing_comment(line: str) -> str:
    """``code  # comment`` -> ``code`` when the ``#`` cannot be inside a string or an expansion:
    the code before it has balanced quotes and no backslash, backquote or ``#``."""
    m = _TRAILING.search(line)
    if not m:
        return line
    code = line[: m.start()]
    if code.count("'") % 2 or code.count('"') % 2 or any(c in code for c in "\\`#"):
        return line
    return code


def _is_comment(stripped: str) -> bool:
    return not stripped or (stripped.startswith("#") and not stripped.startswith("#!"))


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]


def _names(nodes: list[ast.stmt]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def _prune(tree: ast.Module, keep: frozenset[str]) -> None:
    """Drop the top-level functions named with a DYNAMIC_PREFIXES prefix that are not in ``keep`` (the
    helper and the copier look them up by name: ``globals().get("secret_" + kind)``), then the functions
    only they used."""
    before = _names(tree.body)

    def dropped(node: ast.stmt) -> bool:
        return isinstance(node, ast.FunctionDef) and node.name.startswith(DYNAMIC_PREFIXES) and node.name not in keep

    tree.body = [node for node in tree.body if not dropped(node)]
    while True:
        used = _names(tree.body)
        body = [node for node in tree.body
                if not (isinstance(node, ast.FunctionDef) and node.name in before and node.name not in used)]
        if len(body) == len(tree.body):
            return
        tree.body = body


def minify_python(source: str, keep: frozenset[str] | None = None) -> str:
    """The same Python program without docstrings, comments, blank lines and with one space per
    indentation level; with ``keep``, without the ``secret_*`` functions not in it (see _prune).
    ``source`` unchanged when it does not parse or the result would not parse to the same tree."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    _strip_docstrings(tree)
    if keep is not None:
        _prune(tree, keep)
    lines = []
    for line in ast.unparse(tree).split("\n"):
        code = line.lstrip(" ")
        if code:
            lines.append(" " * ((len(line) - len(code)) // 4) + code)
    shebang = source.split("\n", 1)[0] if source.startswith("#!") else ""
    out = "\n".join(([shebang] if shebang else []) + lines)
    try:
        same = ast.dump(ast.parse(out)) == ast.dump(tree)
    except SyntaxError:
        same = False
    return out if same else source


def compact_shell(text: str, keep: frozenset[str] | None = None) -> str:
    """``text`` (shell code without profile values outside heredocs) compacted as described in
    the module docstring."""
    out: list[str] = []
    delim: str | None = None
    python = False
    program: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        if delim is not None:
            if line == delim:
                if python:
                    out.extend(minify_python("\n".join(program), keep).split("\n"))
                    program = []
                out.append(line)
                delim = None
            elif python:
                program.append(line)
            elif delim.endswith("_SH") and _is_comment(stripped):
                continue  # full-line comments of the verbatim shell programs
            elif delim.endswith("_SH"):
                out.append(_drop_trailing_comment(line))
            else:
                out.append(line)
            continue
        if _is_comment(stripped):
            continue
        line = _drop_trailing_comment(_FUNC_COMMENT.sub(r"\1", line.lstrip(" ")))
        out.append(line)
        m = _HEREDOC.search(line)
        if m:
            delim = m.group(2)
            python = bool(m.group(1)) and delim.endswith("_PY")
    if delim is not None:  # an unterminated heredoc: keep what was collected as it was
        out.extend(program)
    return "\n".join(out)
