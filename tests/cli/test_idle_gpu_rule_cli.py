"""`plan` and `up` show the stalled-GPU idle rule (lifecycle.idle_gpu_util_percent / idle_gpu_minutes), and a
profile that does not set it keeps its hash (VM identity)."""

from __future__ import annotations

import sys

from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


def test_plan_shows_the_default_rule_text_and_json(cli, clouds) -> None:
    r = cli("plan", T4)
    assert r.code == 0, r.err
    assert "a process holding the GPU below 5 % for 60 min counts as idle" in r.out
    doc = cli("plan", T4, "--json").json()["lifecycle"]
    assert doc["idle_gpu"] == {"util_percent": 5, "minutes": 60}


def test_plan_shows_the_rule_off(cli, clouds, write_yaml) -> None:
    p = write_yaml(f"name: x\nextends: {T4}\nlifecycle: {{idle_shutdown_minutes: 60, idle_gpu_minutes: null}}\n")
    r = cli("plan", str(p))
    assert r.code == 0, r.err
    assert "a process holding the GPU is always busy (idle_gpu_minutes: null)" in r.out
    assert cli("plan", str(p), "--json").json()["lifecycle"]["idle_gpu"] is None


def test_up_confirmation_shows_the_rule(cli, clouds, monkeypatch, write_yaml) -> None:
    import typer

    asked: list[str] = []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(typer, "confirm", lambda text, **kw: asked.append(text) or False)
    p = write_yaml(f"name: x\nextends: {T4}\nlifecycle: {{idle_gpu_util_percent: 10, idle_gpu_minutes: 30}}\n")
    r = cli("up", str(p))
    assert r.code == 1 and asked
    assert "stalled GPU: a process holding the GPU below 10 % for 30 min counts as idle" in r.err


def test_setting_the_rule_changes_the_hash_leaving_it_unset_does_not() -> None:
    """tests/profile/test_hash_stability.py pins the hashes of the bundled profiles (none sets the rule)."""
    from provisioner.profile.loader import profile_hash
    from provisioner.profile.model import Profile
    from tests.helpers import make_profile

    doc = make_profile({"gpu": "T4"})
    unset = profile_hash(Profile.model_validate(doc))
    assert profile_hash(Profile.model_validate({**doc, "lifecycle": {"idle_shutdown_minutes": 60}})) == unset
    assert profile_hash(Profile.model_validate({**doc, "lifecycle": {"idle_gpu_minutes": 30}})) != unset
    assert profile_hash(Profile.model_validate({**doc, "lifecycle": {"idle_gpu_minutes": None}})) != unset
