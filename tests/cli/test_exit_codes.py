"""Exit codes of every command against docs/spec.md "Errors and exit codes", beyond the error table in
test_error_contract.py: the VM commands agree about a missing VM (4) and about a name on two clouds
(2, refused with the same message as `down`), and `down` of a missing VM stays 0."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_up_money import _record
from tests.conftest import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")

# every command that acts on one existing VM, as it is called
VM_COMMANDS = {
    "status": ["status", "{name}"],
    "verify": ["verify", "{name}"],
    "logs": ["logs", "{name}"],
    "ssh": ["ssh", "{name}"],
    "stop": ["stop", "{name}", "--yes"],
    "start": ["start", "{name}"],
    "verify --perf": ["verify", "{name}", "--perf", "--baseline", str(REPO / "tests" / "none.perf.json")],
}


@pytest.mark.parametrize("verb", list(VM_COMMANDS))
@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
def test_a_missing_vm_is_exit_4_for_every_vm_command(cli, clouds, verb, json_out, monkeypatch) -> None:
    if json_out and verb == "ssh":
        pytest.skip("ssh has no --json: it execs ssh")
    if verb == "verify --perf":
        monkeypatch.setattr("provisioner.verify.perfdoc.load_perf", lambda path: {})
    argv = [a.format(name="no-such-vm") for a in VM_COMMANDS[verb]] + (["--json"] if json_out else [])
    r = cli(*argv)
    assert r.code == 4, (verb, r.out, r.err)
    assert "no trainvm VM named no-such-vm" in r.err and "Traceback" not in r.err
    if json_out:
        doc = json.loads(r.out)
        assert set(doc) == {"error"} and doc["error"]["exit_code"] == 4 and doc["error"]["type"] == "NotFoundError"
    else:
        assert r.out == ""


def test_a_missing_vm_with_cloud_names_that_cloud(cli, clouds) -> None:
    r = cli("stop", "no-such-vm", "--cloud", "azure", "--yes")
    assert r.code == 4 and "no trainvm VM named no-such-vm on azure" in r.err
    assert cli("start", "no-such-vm", "--cloud", "moon").code == 2  # an unknown cloud is a usage error


@pytest.mark.parametrize("verb", [v for v in VM_COMMANDS if v != "status"])
def test_a_name_on_two_clouds_is_refused_like_down(cli, clouds, verb, monkeypatch) -> None:
    if verb == "verify --perf":
        monkeypatch.setattr("provisioner.verify.perfdoc.load_perf", lambda path: {})
    name = "trainvm-twice-1"
    clouds["gcp"].vms[name] = _record(name=name)
    clouds["azure"].vms[name] = _record(name=name, cloud="azure", region="eastus", zone=None)
    argv = [a.format(name=name) for a in VM_COMMANDS[verb]]
    r = cli(*argv)
    assert r.code == 2, (verb, r.err)
    assert f"exists on gcp (us-central1-a) and azure (eastus); `{verb}` will not guess" in r.err
    assert "--cloud gcp or --cloud azure" in r.err
    assert clouds["gcp"].vms[name].state == clouds["azure"].vms[name].state == "RUNNING"  # nothing was done


def test_stop_and_start_with_cloud_act_on_that_cloud_only(cli, clouds) -> None:
    name = "trainvm-twice-2"
    clouds["gcp"].vms[name] = _record(name=name)
    clouds["azure"].vms[name] = _record(name=name, cloud="azure", region="eastus", zone=None)
    r = cli("stop", name, "--cloud", "azure", "--yes", "--json")
    assert r.code == 0 and r.json()["cloud"] == "azure" and r.json()["stopped"] is True
    assert clouds["azure"].vms[name].state != "RUNNING" and clouds["gcp"].vms[name].state == "RUNNING"
    r = cli("start", name, "--cloud", "azure", "--json")
    assert r.code == 0 and r.json()["started"] is True and clouds["azure"].vms[name].state == "RUNNING"


def test_down_of_a_name_never_created_is_4_unless_missing_ok(cli, clouds) -> None:
    r = cli("down", "no-such-vm", "--yes")
    assert r.code == 4 and "already gone" not in r.out and "no VM named no-such-vm" in r.err
    doc = cli("down", "no-such-vm", "--yes", "--json", "--missing-ok").json()
    assert doc["already_gone"] is True and doc["deleted"] is False


def test_validate_json_unreadable_file_is_one_error_document_with_every_result(cli, tmp_path, write_yaml) -> None:
    good = write_yaml({"name": "x"}, name="bad-but-readable.yaml")
    r = cli("validate", str(good), str(tmp_path / "absent.yaml"), "--json")
    assert r.code == 2
    doc = json.loads(r.out)  # exactly one document
    assert set(doc) == {"error"}
    err = doc["error"]
    assert err["exit_code"] == 2 and "absent.yaml" in err["message"] and err["type"] == "UnreadableProfileError"
    assert [x["file"] for x in err["results"]] == [str(good), str(tmp_path / "absent.yaml")]
    assert err["results"][0]["valid"] is False and err["results"][0]["errors"]  # the readable one was validated
    # without an unreadable file, validate --json is the results document (exit 1 for an invalid profile)
    r = cli("validate", str(good), "--json")
    assert r.code == 1 and set(r.json()) == {"results"}


def test_a_vm_name_with_control_codes_is_refused_before_any_cloud_call_and_shown_escaped(cli, clouds) -> None:
    for verb in ("status", "verify", "logs", "ssh", "start", "down"):
        r = cli(verb, "x\x1b]0;pwned\x07")
        assert r.code == 2 and "not a trainvm VM name" in r.err, (verb, r.err)
        assert "\x1b" not in r.err and "\x07" not in r.err and "\\x1b" in r.err
    assert clouds["gcp"].calls == clouds["azure"].calls == []  # no cloud was asked


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "symlink_loop", "sparse"])
def test_a_lock_file_that_is_not_a_regular_file_is_an_input_error_not_no_lock(cli, tmp_path, kind) -> None:
    """NAME.lock next to the profile that is a FIFO, a device, a symlink loop or a sparse 2 GiB file: exit 2
    naming it (not "no lock file ... run trainvm lock", not a hang, not a read of 2 GiB)."""
    import os
    import shutil

    profile = tmp_path / "bert-finetune-t4.yaml"
    shutil.copy(T4, profile)
    lock = tmp_path / "bert-finetune-t4.lock"
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "dev_zero":
        lock.symlink_to("/dev/zero")
    elif kind == "symlink_loop":
        (tmp_path / "other.lock").symlink_to(lock)
        lock.symlink_to(tmp_path / "other.lock")
    else:
        with open(lock, "wb") as f:
            f.truncate(2 << 30)
    r = cli("plan", str(profile))
    assert r.code == 2, r.err
    assert "bert-finetune-t4.lock" in r.err and "no lock file" not in r.err
    assert {"fifo": "FIFO", "dev_zero": "character device", "symlink_loop": "symlink loop", "sparse": "bytes"}[kind] in r.err


# ------------------------------------------------------------------ no cloud could be asked (issue 30)
@pytest.fixture
def no_cloud_to_ask(clouds, monkeypatch, install_providers):
    """No cloud can be asked: GCE and Azure have no credentials (their provider cannot be made, as the real
    ones raise), AWS's provider is made but fails at its first call (as boto3 does without credentials)."""
    from provisioner.errors import CredentialsError
    from provisioner.providers.aws.api import AwsCredentialsError

    def no_credentials(cloud):
        def make(**_candidates):
            raise CredentialsError(f"no {cloud} credentials (fake)", hint=f"log in to {cloud} (fake hint)")
        return make

    def aws_fails(*_args):
        raise AwsCredentialsError("no AWS credentials found", hint="run `aws configure` (fake hint)")

    install_providers({"aws": clouds["aws"]}, {c: no_credentials(c) for c in ("gcp", "azure")})
    clouds["aws"].list = aws_fails
    clouds["aws"].find = aws_fails
    return clouds


def _names_every_cloud_not_asked(text: str) -> None:
    assert "no cloud could be asked" in text, text
    assert "no gcp credentials (fake)" in text and "no azure credentials (fake)" in text
    assert "no AWS credentials found" in text


@pytest.mark.parametrize("argv", [["list"], ["status"], ["list", "--cloud", "aws"]], ids=" ".join)
def test_list_and_status_with_no_cloud_to_ask_are_exit_3_not_nothing_found(cli, no_cloud_to_ask, argv) -> None:
    r = cli(*argv)
    assert r.code == 3, (r.out, r.err)
    assert "no trainvm VMs found" not in r.out + r.err
    if "--cloud" in argv:
        assert "no cloud could be asked" in r.err and "no AWS credentials found" in r.err
        assert "run `aws configure` (fake hint)" in r.err
    else:
        _names_every_cloud_not_asked(r.err)
        for hint in ("log in to gcp (fake hint)", "log in to azure (fake hint)", "run `aws configure` (fake hint)"):
            assert hint in r.err
    doc = cli(*argv, "--json")
    assert doc.code == 3
    err = doc.json()["error"]
    assert set(doc.json()) == {"error"} and err["exit_code"] == 3 and err["type"] == "NoCloudAskedError"
    assert "no cloud could be asked" in err["message"] and "run `aws configure` (fake hint)" in err["hint"]
    expected = {"aws"} if "--cloud" in argv else {"gcp", "azure", "aws"}
    assert {s["cloud"] for s in err["skipped"]} == expected


@pytest.mark.parametrize("verb", [*VM_COMMANDS, "down"])
def test_every_vm_command_with_no_cloud_to_ask_is_exit_3(cli, no_cloud_to_ask, verb, monkeypatch) -> None:
    if verb == "verify --perf":
        monkeypatch.setattr("provisioner.verify.perfdoc.load_perf", lambda path: {})
    argv = [a.format(name="some-vm") for a in VM_COMMANDS.get(verb, ["down", "{name}", "--yes"])]
    r = cli(*argv)
    assert r.code == 3, (verb, r.out, r.err)
    assert "no trainvm VM named" not in r.err and "already gone" not in r.out


def test_status_name_with_no_cloud_to_ask_names_the_clouds(cli, no_cloud_to_ask) -> None:
    r = cli("status", "some-vm")
    assert r.code == 3 and "no trainvm VM named" not in r.err
    _names_every_cloud_not_asked(r.err)


def test_list_with_some_clouds_asked_shows_what_was_found_and_names_the_others(cli, no_cloud_to_ask, monkeypatch,
                                                                                install_providers) -> None:
    from provisioner.hooks import providers
    from tests.cli.test_up_money import _record

    fakes = no_cloud_to_ask
    asked = providers.DEFAULT  # no_cloud_to_ask's: Azure cannot be made, AWS fails at its first call
    install_providers({"gcp": fakes["gcp"], "aws": fakes["aws"]}, {"azure": lambda **_: asked.get("azure")})
    r = cli("list")
    assert r.code == 0, r.err
    assert "no trainvm VMs found on gcp" in r.out
    assert "not asked" in r.err and "azure: no azure credentials (fake)" in r.err and "aws: no AWS credentials found" in r.err
    doc = cli("list", "--json").json()
    assert doc["vms"] == [] and doc["asked"] == ["gcp"] and {s["cloud"] for s in doc["skipped"]} == {"azure", "aws"}

    fakes["gcp"].vms["trainvm-s-1"] = _record()
    r = cli("list")
    assert r.code == 0 and "trainvm-s-1" in r.out and "azure" in r.err and "aws" in r.err
    r = cli("status", "no-such-vm")  # some cloud was asked: it is not there (4), and the hint says where it was not looked for
    assert r.code == 4 and "not looked for on: azure" in r.err
