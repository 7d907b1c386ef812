"""Numbers in messages, in words people read: durations ("30 min 20 s", not "30.3333 min") and counts with their
noun's plural ("1 image", "2 images"). Pure; imported by the commands' messages."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """45 s, 12 min, 30 min 20 s, 1 h 5 min, 3 days 4 h: at most two units, rounded to the smaller one."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        m, r = divmod(s, 60)
        return f"{m} min" + (f" {r} s" if r else "")
    if s < 86400:
        h, r = divmod(s, 3600)
        m = round(r / 60)
        if m == 60:
            h, m = h + 1, 0
        return f"{h} h" + (f" {m} min" if m else "")
    d, r = divmod(s, 86400)
    h = round(r / 3600)
    if h == 24:
        d, h = d + 1, 0
    return plural(d, "day") + (f" {h} h" if h else "")


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``1 image``, ``2 images``, ``0 images`` (``many``: an irregular plural)."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"
