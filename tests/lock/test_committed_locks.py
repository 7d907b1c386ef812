"""Every lock file committed next to a bundled profile is fresh (``trainvm lock --check``, offline: the
check reads the profile and the lock, never an index). Today none is committed: see README "Bundled
examples and locks" for why (the torch examples need download.pytorch.org; tf-resnet50's locked
closure does not fit in AWS user data). This guards the ones that will be."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOCKS = sorted((REPO / "profiles").rglob("*.lock"))


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: str(p.relative_to(REPO)))
def test_each_committed_lock_is_fresh(lock: Path, cli, monkeypatch) -> None:
    monkeypatch.setenv("TRAINVM_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens: --check must not resolve
    profile = next((lock.with_suffix(s) for s in (".yaml", ".yml") if lock.with_suffix(s).is_file()), None)
    assert profile is not None, f"{lock} has no profile next to it"
    r = cli("lock", str(profile), "--check")
    assert r.code == 0, r.err
