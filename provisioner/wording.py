"""Messages in words people read: durations ("30 min 20 s", not "30.3333 min"), counts with their noun's plural
("1 image", "2 images"), and failures without Python type names or HTML pages in them. Pure; no import beyond re."""

from __future__ import annotations

import re


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


_HTML = re.compile(r"<!doctype\s+html|<html[\s>]", re.I)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)


def without_html(text: str) -> str:
    """``text`` with an HTML page in it (a proxy's or load balancer's 502/503 page where an API answer was due)
    replaced by what it is, and its title: "HTTP 503 after 3 tries: an HTML page (503 Service Unavailable) instead
    of an API answer"."""
    m = _HTML.search(text)
    if m is None:
        return text
    title = _TITLE.search(text, m.start())
    named = " ".join(title.group(1).split())[:120] if title else ""
    return text[:m.start()].rstrip() + " an HTML page" + (f" ({named})" if named else "") + " instead of an API answer"


def failure_words(exc: BaseException) -> str:
    """What went wrong, in the exception's own words (its first line, HTML pages named, never its Python type name);
    an exception with no words says what kind of failure it was."""
    text = without_html(str(exc)).strip()
    if text:
        return text.splitlines()[0][:300]
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ConnectionError):
        return "the connection failed"
    return "failed without a message"
