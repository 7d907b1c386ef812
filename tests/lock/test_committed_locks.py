"""Every lock file committed next to a bundled profile is fresh (``trainvm lock --check``, offline: the
check reads the profile and the lock, never an index), and the locked profile plans and renders on every cloud
with the same small bootstrap as user data (the locked closure travels in the payload). tf-resnet50's lock is
committed (PyPI alone); the torch examples need download.pytorch.org, unreachable where they were prepared
(docs/locks.md, "Bundled examples and locks")."""

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


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: str(p.relative_to(REPO)))
@pytest.mark.parametrize("cloud", ["gcp", "azure", "aws"])
def test_each_locked_profile_renders_on_every_cloud_as_a_small_bootstrap(lock: Path, cloud: str, cli, tmp_path) -> None:
    import gzip
    import json

    profile = next(lock.with_suffix(s) for s in (".yaml", ".yml") if lock.with_suffix(s).is_file())
    out = tmp_path / cloud
    r = cli("render", str(profile), "--cloud", cloud, "--out", str(out), "--json")
    if r.code == 1 and "no feasible offer" in r.err and "rejected: cloud" in r.err:
        assert "user data" not in r.err and "does not fit" not in r.err
        return  # that cloud has no offer of the GPU (tf-resnet50: no L4 on Azure in the catalog); nothing about size
    assert r.code == 0, r.err
    boot = (out / "user-data").read_bytes()
    assert len(gzip.compress(boot, 9, mtime=0)) <= 4096
    script = (out / "payload" / "startup.sh").read_text()
    locked = json.loads(lock.read_text())
    assert locked["packages"] and all(f"{p['name']} @ {p['url']}" in script for p in locked["packages"])  # the whole closure
    if cloud in (json.loads(cli("plan", str(profile), "--json").out).get("request") or {}).get("clouds", []):
        assert cli("plan", str(profile), "--cloud", cloud).code == 0
