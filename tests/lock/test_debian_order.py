"""python-debian's Debian version order (what ``trainvm lock`` uses to pick the highest driver revision,
provisioner/lock/driver.py) agrees with the real ``dpkg --compare-versions`` of this machine, for generated
versions: epochs, ``~`` (sorts before everything, even the end), ``+``/``.`` separators, letters, leading
zeros, Debian revisions such as ``-0ubuntu1`` or ``-1~deb12u1``."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.lock.driver import dpkg_compare, parse_packages

pytestmark = pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg is not on this machine")

# dpkg's rules (deb-version(7)): upstream starts with a digit and has [A-Za-z0-9.+~-] (a "-" only when there
# is a revision); the revision has [A-Za-z0-9.+~]; an epoch is a number before ":"
_UP_CHARS = "0123456789ab.+~"
_REV_CHARS = "0123456789ub.+~"
upstream = st.builds(lambda d, rest: d + rest, st.sampled_from("0123456789"), st.text(_UP_CHARS, max_size=6))
revision = st.text(_REV_CHARS, min_size=1, max_size=5).filter(lambda r: r[0] != "~" or len(r) > 1)
versions = st.builds(
    lambda epoch, up, rev: (f"{epoch}:" if epoch is not None else "") + up + (f"-{rev}" if rev else ""),
    st.one_of(st.none(), st.integers(0, 3)), upstream, st.one_of(st.none(), revision))


def dpkg(a: str, op: str, b: str) -> bool:
    return subprocess.run(["dpkg", "--compare-versions", a, op, b], check=False).returncode == 0


def dpkg_sign(a: str, b: str) -> int:
    return -1 if dpkg(a, "lt", b) else (0 if dpkg(a, "eq", b) else 1)


@settings(max_examples=300, deadline=None)
@given(versions, versions)
def test_the_library_orders_versions_as_dpkg_does(a: str, b: str) -> None:
    mine = dpkg_compare(a, b)
    assert (mine > 0) - (mine < 0) == dpkg_sign(a, b)


@settings(max_examples=100, deadline=None)
@given(versions)
def test_a_version_and_its_near_neighbours_order_as_dpkg_does(a: str) -> None:
    """The cases that matter for revisions: ``~`` and ``+`` suffixes, one more revision digit."""
    for b in (a + "~", a + "+b1", a + ".0", a + "0", a + "a"):
        mine = dpkg_compare(a, b)
        assert (mine > 0) - (mine < 0) == dpkg_sign(a, b), (a, b)


def test_stanzas_with_an_invalid_version_are_left_out_as_dpkg_rejects_them() -> None:
    text = "Package: good\nVersion: 1.0-1\n\nPackage: bad\nVersion: 1.0 beta\n\nPackage: novers\n\n"
    done = subprocess.run(["dpkg", "--compare-versions", "1.0 beta", "eq", "1.0 beta"], capture_output=True, check=False)
    assert done.returncode == 2 and b"bad syntax" in done.stderr
    assert [st["Package"] for st in parse_packages(text)] == ["good"]


def test_continuation_lines_and_unrelated_fields_do_not_confuse_the_parser() -> None:
    text = ("Package: nvidia-open\nVersion: 550.127.05-1\nArchitecture: amd64\nDescription: open modules\n"
            " Version: 999-9\n .\n more text\n\nPackage: cuda-drivers\nArchitecture: all\nVersion: 550.127.05-2\n")
    assert parse_packages(text) == [
        {"Package": "nvidia-open", "Version": "550.127.05-1", "Architecture": "amd64"},
        {"Package": "cuda-drivers", "Version": "550.127.05-2", "Architecture": "all"},
    ]
