"""The parsed-data cache can only make things faster, never different."""

from __future__ import annotations

from pathlib import Path

from provisioner.cache import cache_dir, cached


def test_cache_hit_miss_on_edit_and_corruption(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    src = tmp_path / "data.txt"
    src.write_text("one")
    calls = []

    def build() -> str:
        calls.append(1)
        return src.read_text().upper()

    assert cached("t", [src], build) == "ONE"
    assert cached("t", [src], build) == "ONE" and len(calls) == 1  # hit
    src.write_text("two")
    assert cached("t", [src], build) == "TWO" and len(calls) == 2  # data edit misses
    for f in cache_dir().glob("t-*.pickle"):
        f.write_bytes(b"garbage")
    assert cached("t", [src], build) == "TWO" and len(calls) == 3  # corrupt entry rebuilt
    monkeypatch.setenv("TRAINVM_NO_CACHE", "1")
    assert cached("t", [src], build) == "TWO" and len(calls) == 4


def test_unwritable_cache_still_works(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file, not a folder
    src = tmp_path / "d"
    src.write_text("v")
    assert cached("t", [src], lambda: 42) == 42
