"""The Compute Engine list-filter language for the emulator (tests/emulators/gce.py): `labels.k = v`, `!=`, `:`,
`:*`, `eq`/`ne` regex, parentheses, implicit or explicit AND, OR."""
from __future__ import annotations

import json
import re

_TOKEN = re.compile(r'\s*(?:(\()|(\))|("(?:[^"\\]|\\.)*")|(!=|=|:|<=|>=|<|>)|([^\s()"=!:<>]+))')


def _tokens(expr: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(expr.rstrip()):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise ValueError(f"unexpected character at {pos}")
        pos = m.end()
        lp, rp, quoted, op, word = m.groups()
        out.append(("(", lp) if lp else (")", rp) if rp else ("str", json.loads(quoted)) if quoted
                   else ("op", op) if op else ("word", word))
    return out


def _field(res: dict, path: str):
    cur = res
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return None if isinstance(cur, (dict, list)) else str(cur)


def _compare(field: str, op: str, lit: str):
    if op in ("eq", "ne"):
        rx = re.compile(lit)
        return lambda r: (_field(r, field) is not None and bool(rx.fullmatch(_field(r, field)))) == (op == "eq")
    if op == ":" and lit == "*":
        return lambda r: _field(r, field) is not None
    glob = re.compile(".*".join(map(re.escape, lit.split("*"))), re.S)
    if op in ("=", ":"):
        return lambda r: _field(r, field) is not None and bool(glob.fullmatch(_field(r, field)))
    if op == "!=":
        return lambda r: not (_field(r, field) is not None and glob.fullmatch(_field(r, field)))
    cmp = {"<": str.__lt__, ">": str.__gt__, "<=": str.__le__, ">=": str.__ge__}[op]
    return lambda r: _field(r, field) is not None and cmp(_field(r, field), lit)


def compile_filter(expr: str | None):
    """Compile a Compute list filter into a predicate over a resource dict; ValueError when unparsable."""
    if not expr or not expr.strip():
        return lambda r: True
    toks, i = _tokens(expr), 0

    def peek():
        return toks[i] if i < len(toks) else (None, None)

    def take():
        nonlocal i
        i += 1
        return toks[i - 1]

    def term():
        kind, val = take()
        if kind == "(":
            inner = conj()
            if take()[0] != ")":
                raise ValueError("missing )")
            return inner
        if kind == "word" and val == "NOT":
            sub = term()
            return lambda r: not sub(r)
        if kind != "word":
            raise ValueError(f"expected a field name, got {val!r}")
        op_kind, op = take()
        if not (op_kind == "op" or (op_kind == "word" and op in ("eq", "ne"))):
            raise ValueError(f"expected a comparison after {val!r}")
        lit_kind, lit = take()
        if lit_kind not in ("word", "str"):
            raise ValueError(f"expected a value after {val} {op}")
        return _compare(val, op, lit)

    def disj():
        parts = [term()]
        while peek() == ("word", "OR"):
            take()
            parts.append(term())
        return parts[0] if len(parts) == 1 else (lambda r: any(p(r) for p in parts))

    def conj():
        parts = [disj()]
        while peek()[0] not in (None, ")"):
            if peek() == ("word", "AND"):
                take()
            parts.append(disj())
        return lambda r: all(p(r) for p in parts)

    pred = conj()
    if i != len(toks):
        raise ValueError("trailing tokens")
    return pred
