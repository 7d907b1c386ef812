"""Version comparisons, all on ``packaging``: the one place that says what "the same version" means.

- ``parse(text)``: a ``Version``, or None when the text is not a version.
- ``equal(a, b)``: the same version, local label included ("2.4.1+cu124" != "2.4.1"); texts that are not
  versions compare as strings.
- ``same_release_prefix(a, b)``: the release numbers agree as far as both go ("9.1" ~ "9.1.0.70", either way
  round): a compatibility fact and a pin written at different precisions.
- ``matches_at_precision(expected, observed)``: ``observed`` agrees with ``expected`` at the precision of
  ``expected`` ("9.1" matches "9.1.0.70"; "9.1.0.70" does not match "9.1"): what a machine reports against
  what a profile asks for.

Part of the agent (the comparison needs it on the VM): ``packaging`` and the standard library only.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version


def parse(text: str | None) -> Version | None:
    if text is None:
        return None
    try:
        return Version(text.strip())
    except InvalidVersion:
        return None


def equal(a: str, b: str) -> bool:
    va, vb = parse(a), parse(b)
    if va is None or vb is None:
        return a.strip() == b.strip()
    return va == vb


def _release(text: str) -> tuple[int, ...] | None:
    v = parse(text)
    return None if v is None else v.release


def same_release_prefix(a: str, b: str) -> bool:
    ra, rb = _release(a), _release(b)
    if ra is None or rb is None:
        return a.strip() == b.strip()
    n = min(len(ra), len(rb))
    return ra[:n] == rb[:n]


def matches_at_precision(expected: str, observed: str | None) -> bool:
    if observed is None:
        return False
    want, got = _release(expected), _release(observed)
    if want is None or got is None:
        return expected.strip() == observed.strip()
    return got[: len(want)] == want and len(got) >= len(want)
