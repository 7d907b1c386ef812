"""``plan --frozen`` / ``up --frozen`` (and TRAINVM_FROZEN=1): only what the lock pins is used; a
missing or stale lock is refused (exit 1) before anything else happens."""

from __future__ import annotations


def test_plan_frozen_refuses_a_missing_lock_and_passes_a_fresh_one(write_yaml, lock_cli, cli, profile_doc) -> None:
    path = write_yaml(profile_doc(["alpha==1.0"]))
    assert cli("plan", str(path)).code == 0  # without --frozen: a warning only
    r = cli("plan", str(path), "--frozen")
    assert r.code == 1 and "frozen" in r.err and "no lock file p.lock" in r.err and "trainvm lock" in r.err
    r = cli("plan", str(path), "--frozen", "--json")
    assert r.code == 1 and r.json()["error"]["exit_code"] == 1 and "no lock file" in r.json()["error"]["message"]
    assert lock_cli(path).code == 0
    assert cli("plan", str(path), "--frozen").code == 0
    write_yaml(profile_doc(["alpha==1.0", "multi==1.0"]))
    r = cli("plan", str(path), "--frozen")
    assert r.code == 1 and "p.lock is stale" in r.err


def test_frozen_from_the_environment(write_yaml, cli, profile_doc, monkeypatch) -> None:
    path = write_yaml(profile_doc(["alpha==1.0"]))
    monkeypatch.setenv("TRAINVM_FROZEN", "0")
    assert cli("plan", str(path)).code == 0
    monkeypatch.setenv("TRAINVM_FROZEN", "1")
    r = cli("plan", str(path))
    assert r.code == 1 and "no lock file" in r.err


def test_up_frozen_refuses_a_missing_lock_before_any_cloud_call(write_yaml, cli, profile_doc, monkeypatch) -> None:
    # no credentials at all: the refusal must come from the lock, not from a cloud
    for var in ("GOOGLE_APPLICATION_CREDENTIALS", "AZURE_SUBSCRIPTION_ID", "TRAINVM_GCP_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    path = write_yaml(profile_doc(["alpha==1.0"]))
    r = cli("up", str(path), "--frozen", "--yes")
    assert r.code == 1 and "no lock file p.lock" in r.err


def test_a_hand_written_requirements_lock_satisfies_frozen(write_yaml, cli, profile_doc, tmp_path) -> None:
    (tmp_path / "requirements.lock").write_text("alpha==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    path = write_yaml(profile_doc(["alpha==1.0"], requirements="requirements.lock"))
    assert cli("plan", str(path), "--frozen").code == 0
