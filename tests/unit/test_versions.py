"""provisioner/versions.py: the one meaning of "the same version" (packaging underneath)."""

from __future__ import annotations

import pytest

from provisioner import versions


@pytest.mark.parametrize(("a", "b", "same"), [
    ("2.4.1", "2.4.1", True),
    ("2.4.1", "2.4.1.0", True),             # packaging: trailing zeros are equal
    ("2.4.1+cu124", "2.4.1", False),        # the local label is part of the build
    ("2.4.1+cu124", "2.4.1+cu124", True),
    ("1.0", "1.0rc1", False),
    ("not-a-version", "not-a-version", True),
    ("not-a-version", "1.0", False),
])
def test_equal(a: str, b: str, same: bool) -> None:
    assert versions.equal(a, b) is same
    assert versions.equal(b, a) is same


@pytest.mark.parametrize(("a", "b", "same"), [
    ("9.1", "9.1.0.70", True),
    ("9.1.0.70", "9.1", True),              # either way round: a fact and a pin at different precisions
    ("9.1", "9.10", False),                 # numbers, not text: "9.1" is not a prefix of "9.10"
    ("8.9", "9.1.0", False),
    ("9", "9.1.0", True),
])
def test_same_release_prefix(a: str, b: str, same: bool) -> None:
    assert versions.same_release_prefix(a, b) is same


@pytest.mark.parametrize(("expected", "observed", "ok"), [
    ("9.1", "9.1.0.70", True),
    ("9.1.0.70", "9.1", False),             # the machine must report at least the precision asked for
    ("9.1", "9.10.0", False),
    ("9.1", None, False),
    ("9.1", "garbage", False),
])
def test_matches_at_precision(expected: str, observed: str | None, ok: bool) -> None:
    assert versions.matches_at_precision(expected, observed) is ok
