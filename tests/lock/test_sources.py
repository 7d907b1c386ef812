"""Team profile sources through real git repositories in a temp folder (file:// URLs): the lock
pins the commit, a moved tag is a warning naming both commits, `--upgrade` moves the lock and
shows the merged-profile diff, a second clone (fresh cache) gets the locked commit, --frozen never
fetches, TRAINVM_PROFILE_PATH shadows a source with a warning."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from provisioner.lock.model import read_lock

BASE = """\
name: team-base
stack:
  os: ubuntu-22.04
  driver: "550.127.05"
  python: "{python}"
  packages: [{packages}]
  env:
    PYTHONHASHSEED: "0"
"""
CHILD = """\
name: myjob
extends: team:base/torch-2.4-cu124
hardware:
  gpu: T4
"""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", *args],
                          capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


def _commit_base(repo: Path, python: str, packages: str, message: str) -> str:
    (repo / "base").mkdir(parents=True, exist_ok=True)
    (repo / "base/torch-2.4-cu124.yaml").write_text(BASE.format(python=python, packages=packages))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """A team repo tagged v1, and a project whose trainvm.yaml declares it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINVM_PROFILE_PATH", raising=False)
    monkeypatch.delenv("TRAINVM_FROZEN", raising=False)
    repo = tmp_path / "team"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    v1 = _commit_base(repo, "3.11.9", '"alpha==1.0"', "base v1")
    _git(repo, "tag", "v1")
    project = tmp_path / "project"
    (project / "jobs").mkdir(parents=True)
    (project / "trainvm.yaml").write_text(f"sources:\n  - name: team\n    url: {repo.as_uri()}\n    ref: v1\n")
    child = project / "jobs/myjob.yaml"
    child.write_text(CHILD)
    return {"repo": repo, "v1": v1, "project": project, "child": child, "tmp": tmp_path}


def test_lock_records_the_source_commit_and_file_hashes(team, lock_cli, cli) -> None:
    import hashlib

    r = lock_cli(team["child"])
    assert r.code == 0, r.err
    lock = read_lock(team["child"].with_suffix(".lock"))
    (src,) = lock.sources
    assert (src.name, src.url, src.ref, src.commit) == ("team", team["repo"].as_uri(), "v1", team["v1"])
    assert src.files == {"base/torch-2.4-cu124.yaml": hashlib.sha256((team["repo"] / "base/torch-2.4-cu124.yaml").read_bytes()).hexdigest()}
    assert lock.versions() == {"alpha": "1.0", "beta": "1.2"}
    from provisioner.profile import load_profile
    from provisioner.provision.launch import resolved_profile_json

    stored = json.loads(resolved_profile_json(load_profile(team["child"])))
    assert stored["sources"] == [{"name": "team", "url": team["repo"].as_uri(), "ref": "v1", "commit": team["v1"]}]
    from provisioner.verify.compare import compare

    rows = {f.field: f.observed for f in compare(stored, {"status": "ready"}).fields}
    assert rows["source.team"] == team["v1"]  # verify says which commit of the team's base the VM runs
    assert cli("lock", str(team["child"]), "--check").code == 0


def test_a_moved_tag_warns_with_both_commits_and_the_lock_decides_until_upgrade(team, lock_cli, cli) -> None:
    from provisioner.profile import load_profile

    assert lock_cli(team["child"]).code == 0
    v2 = _commit_base(team["repo"], "3.11.10", '"alpha==1.0", "multi==1.0"', "base v2")
    _git(team["repo"], "tag", "-f", "v1")  # the tag moves
    # plan/validate read the locked commit from the cache: nothing fetched, nothing changed
    loaded = load_profile(team["child"])
    assert loaded.profile.stack.python == "3.11.9" and loaded.lock_state == "fresh"
    # `lock` fetches, sees the move, names both commits, keeps the lock
    r = lock_cli(team["child"])
    assert r.code == 0 and "up to date" in r.out
    assert f"the lock pins {team['v1']}" in r.err.replace("\n", "") and v2 in r.err.replace("\n", "")
    assert read_lock(team["child"].with_suffix(".lock")).sources[0].commit == team["v1"]
    # --upgrade moves it and shows what changed in the merged profile
    r = lock_cli(team["child"], "--upgrade")
    assert r.code == 0, r.err
    assert '-    "python": "3.11.9"' in r.out and '+    "python": "3.11.10"' in r.out and "multi: - -> 1.0" in r.out
    lock = read_lock(team["child"].with_suffix(".lock"))
    assert lock.sources[0].commit == v2 and lock.target.python == "3.11.10"
    assert cli("lock", str(team["child"]), "--check").code == 0


def test_a_second_clone_gets_the_locked_commit_not_the_moved_tag(team, lock_cli, monkeypatch) -> None:
    from provisioner.profile import load_profile

    assert lock_cli(team["child"]).code == 0
    _commit_base(team["repo"], "3.11.10", '"alpha==1.0"', "base v2")
    _git(team["repo"], "tag", "-f", "v1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(team["tmp"] / "cache-of-a-colleague"))  # another machine: empty cache
    loaded = load_profile(team["child"])
    assert loaded.profile.stack.python == "3.11.9" and loaded.lock_state == "fresh"
    assert [s.commit for s in loaded.sources] == [team["v1"]]
    assert any("moved" in m.message and team["v1"] in m.message for m in loaded.warnings)


def test_an_unknown_pinned_commit_warns_with_both_commits(team, lock_cli, cli, monkeypatch) -> None:
    assert lock_cli(team["child"]).code == 0
    repo = team["repo"]
    # history rewritten: v1's commit is no longer reachable from any ref
    (repo / "base/torch-2.4-cu124.yaml").write_text(BASE.format(python="3.11.10", packages='"alpha==1.0"'))
    _git(repo, "commit", "-q", "-a", "--amend", "-m", "base v1 rewritten")
    new = _git(repo, "rev-parse", "HEAD")
    _git(repo, "tag", "-f", "v1")
    _git(repo, "reflog", "expire", "--expire=now", "--all")
    _git(repo, "gc", "-q", "--prune=now")
    monkeypatch.setenv("XDG_CACHE_HOME", str(team["tmp"] / "cache-fresh"))
    r = cli("plan", str(team["child"]))
    text = r.err.replace("\n", "")
    assert f"the locked commit {team['v1']} is gone" in text and new in text
    assert r.code == 1 and "stale" in text  # the lock cannot be honoured: plan refuses


def test_plain_lock_refuses_to_repin_a_commit_force_pushed_away(team, lock_cli, cli, monkeypatch) -> None:
    """Upstream force-pushes v1 (and main) over the locked commit and drops it; a teammate with an empty cache runs
    plain `trainvm lock`: it refuses (exit 1) naming the locked commit and upstream's, and writes nothing, so two
    teammates cannot end with different locks. `--upgrade` re-pins. A real bare upstream and `git push --force`."""
    tmp = team["tmp"]
    upstream = tmp / "upstream.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(team["repo"]), str(upstream)], check=True, timeout=60)
    (team["project"] / "trainvm.yaml").write_text(f"sources:\n  - name: team\n    url: {upstream.as_uri()}\n    ref: v1\n")
    assert lock_cli(team["child"]).code == 0
    lock_file = team["child"].with_suffix(".lock")
    before = lock_file.read_bytes()
    assert read_lock(lock_file).sources[0].commit == team["v1"]
    work = tmp / "work"
    subprocess.run(["git", "clone", "-q", str(upstream), str(work)], check=True, timeout=60)
    (work / "base/torch-2.4-cu124.yaml").write_text(BASE.format(python="3.11.10", packages='"alpha==1.0"'))
    _git(work, "commit", "-q", "-a", "--amend", "-m", "base v1 rewritten")
    new = _git(work, "rev-parse", "HEAD")
    _git(work, "tag", "-f", "v1")
    _git(work, "push", "-q", "--force", "origin", "HEAD:main", "refs/tags/v1:refs/tags/v1")
    _git(upstream, "reflog", "expire", "--expire=now", "--all")
    _git(upstream, "gc", "-q", "--prune=now")
    assert subprocess.run(["git", "-C", str(upstream), "cat-file", "-e", f"{team['v1']}^{{commit}}"], capture_output=True).returncode != 0
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp / "cache-teammate"))  # not in the local cache either

    r = lock_cli(team["child"])
    text = (r.out + r.err).replace("\n", "")
    assert r.code == 1, text
    assert team["v1"] in text and new in text and "--upgrade" in text and "Traceback" not in text
    assert lock_file.read_bytes() == before  # nothing re-pinned

    r = lock_cli(team["child"], "--upgrade")
    assert r.code == 0, r.err
    assert read_lock(lock_file).sources[0].commit == new


def test_plain_lock_keeps_a_force_pushed_commit_still_in_the_cache(team, lock_cli) -> None:
    """The same force-push, but this machine's cache still holds the locked commit: plain `lock` keeps the pin
    (a warning names both commits), as before."""
    assert lock_cli(team["child"]).code == 0
    repo = team["repo"]
    (repo / "base/torch-2.4-cu124.yaml").write_text(BASE.format(python="3.11.10", packages='"alpha==1.0"'))
    _git(repo, "commit", "-q", "-a", "--amend", "-m", "base v1 rewritten")
    new = _git(repo, "rev-parse", "HEAD")
    _git(repo, "tag", "-f", "v1")
    _git(repo, "reflog", "expire", "--expire=now", "--all")
    _git(repo, "gc", "-q", "--prune=now")
    r = lock_cli(team["child"])
    assert r.code == 0, r.err
    assert team["v1"] in r.err.replace("\n", "") and new in r.err.replace("\n", "")
    assert read_lock(team["child"].with_suffix(".lock")).sources[0].commit == team["v1"]


def test_frozen_never_fetches_and_fails_when_the_cache_lacks_the_lock(team, lock_cli, cli, monkeypatch) -> None:
    assert lock_cli(team["child"]).code == 0
    assert cli("lock", str(team["child"]), "--check", "--frozen").code == 0  # cache has the commit
    team["repo"].rename(team["tmp"] / "team-gone")  # no fetch could succeed now
    assert cli("lock", str(team["child"]), "--check", "--frozen").code == 0
    monkeypatch.setenv("XDG_CACHE_HOME", str(team["tmp"] / "empty-cache"))
    r = cli("lock", str(team["child"]), "--check", "--frozen")
    assert r.code == 1 and "cache does not have the locked commit" in r.err
    monkeypatch.setenv("TRAINVM_FROZEN", "1")
    assert cli("validate", str(team["child"])).code == 1


def test_profile_path_shadows_a_source_and_plan_says_so(team, lock_cli, cli, monkeypatch, tmp_path) -> None:
    assert lock_cli(team["child"]).code == 0
    local = tmp_path / "my-checkout"
    (local / "base").mkdir(parents=True)
    (local / "base/torch-2.4-cu124.yaml").write_text(BASE.format(python="3.11.9", packages='"alpha==1.0"'))
    monkeypatch.setenv("TRAINVM_PROFILE_PATH", str(local))
    r = cli("plan", str(team["child"]), "--json")
    assert r.code == 0, r.err
    assert any("shadows source team" in w for w in r.json()["warnings"])


def test_an_undeclared_source_is_a_located_error(tmp_path, cli, write_yaml) -> None:
    path = write_yaml(CHILD.replace("team:", "other:"), name="job.yaml")
    r = cli("validate", str(path))
    assert r.code == 1 and "source 'other' is not declared" in r.err and "job.yaml:2" in r.err


@pytest.mark.parametrize("url", ["ext::sh -c touch% /tmp/pwned", "--upload-pack=touch /tmp/x", "relative/path"])
def test_a_source_url_git_would_run_or_misread_is_refused(tmp_path, cli, write_yaml, url) -> None:
    (tmp_path / "trainvm.yaml").write_text(f"sources:\n  - name: team\n    url: '{url}'\n    ref: v1\n")
    r = cli("validate", str(write_yaml(CHILD, name="job.yaml")))
    assert r.code == 2 and "trainvm.yaml:3: sources.0.url" in r.err
