"""`down` of a name: "already gone" (exit 0) only for a VM that existed; a name no cloud has and trainvm never
created here (a typo) is exit 4 with the live VMs it resembles, while the real VM keeps running (issue 36 item 1)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    """This test's own record of what `up` created (commands/vm_record.py)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "trainvm" / "vms.json"


def test_a_mistyped_down_is_exit_4_names_the_real_vm_and_deletes_nothing(cli, clouds) -> None:
    name = cli("up", T4, "--yes", "--json").json()["name"]
    typo = name[:-1]  # one character short
    r = cli("down", typo, "--yes")
    assert r.code == 4, (r.out, r.err)
    assert "already gone" not in r.out and f"no VM named {typo}" in r.err and f"did you mean {name}?" in r.err
    assert clouds["gcp"].vms[name].state == "RUNNING" and ("delete", name) not in clouds["gcp"].calls
    doc = cli("down", typo, "--yes", "--json")
    assert doc.code == 4 and doc.json()["error"]["similar"] == [name] and doc.json()["error"]["exit_code"] == 4


def test_down_stays_idempotent_for_a_vm_up_created(cli, clouds) -> None:
    name = cli("up", T4, "--yes", "--json").json()["name"]
    assert cli("down", name, "--yes").code == 0
    again = cli("down", name, "--yes")
    assert again.code == 0 and "already gone" in again.out and "down deleted it on gcp" in again.out
    assert cli("down", name, "--yes", "--json").json()["already_gone"] is True


def test_a_vm_deleted_by_down_here_is_already_gone_even_without_the_up_record(cli, clouds, state) -> None:
    name = cli("up", T4, "--yes", "--json").json()["name"]
    state.unlink()  # created from another machine: this one only ran `down`
    assert cli("down", name, "--yes").code == 0
    again = cli("down", name, "--yes", "--json")
    assert again.code == 0 and again.json()["already_gone"] is True and again.json()["recorded"]["by"] == "down"


def test_the_record_is_written_before_the_create_so_a_failed_up_is_still_known(cli, clouds) -> None:
    from provisioner.providers.base import AuthError

    for fake in clouds.values():
        for zone in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"):
            fake.fail(zone, AuthError("refused", code="403"))
    up = cli("up", T4, "--yes", "--json")
    assert up.code != 0
    name = f"trainvm-bert-finetune-{json.loads(cli('plan', T4, '--json').out)['hash'][:8]}"
    assert cli("down", name, "--yes").code == 0  # an attempt was made: what it may have left is "already gone"


def test_missing_ok_and_an_unreadable_record(cli, clouds, state) -> None:
    assert cli("down", "trainvm-never-made", "--yes", "--missing-ok").code == 0
    state.parent.mkdir(parents=True)
    state.write_text("{not json")
    r = cli("down", "trainvm-never-made", "--yes")
    assert r.code == 4 and "never created" in r.err and "--missing-ok" in r.err
    assert "did you mean" not in r.err  # no live VM resembles it
