"""Issue 10: the data phase under the stub harness. The `uv` stub installs fake SDKs (tests/stubharness/fakesdk:
boto3, google-cloud-storage, azure-storage-blob/identity over fake buckets in the stub state) into the datatools
venv, so the real copier (templates/files/trainvm_copy.py) runs; the python3 stub's network
(tests/stubharness/pyfake) answers the metadata servers and the secret stores for the helper's secret readers."""

from __future__ import annotations

import hashlib
import json
import re
import stat

import pytest
import trainvm_render_support as S

KEY = {"type": "service_account", "client_email": "reader@other-proj.iam.gserviceaccount.com",
       "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"}


def render(data: list[dict], cloud: str = "gcp", container: bool = False) -> str:
    base = S.container_profile() if container else S.minimal_profile()
    lp = S.from_dict({**base, "data": data})
    return S.render(lp, cloud).startup_sh


def lock_text(scheme: str, os_name: str = "ubuntu-22.04") -> str:
    text = (S.REPO / f"templates/datatools/{scheme}-{os_name}.txt").read_text()
    return "".join(ln for ln in text.splitlines(True) if not ln.startswith("#"))


@pytest.mark.parametrize(("cloud", "source", "bucket", "prefix"), [
    ("gcp", "gs://corpus-bkt/glue/", "corpus-bkt", "glue/"),
    ("aws", "s3://corpus-bkt/glue/", "corpus-bkt", "glue/"),
    ("azure", "az://acct1/cont/glue/", "acct1/cont", "glue/"),
])
def test_native_source_installs_its_tool_once_and_copies_with_the_vm_identity(make_harness, cloud, source, bucket, prefix):
    scheme = source.split("://")[0]
    h = make_harness(render([{"source": source, "dest": "/mnt/data/glue"}], cloud), cloud=cloud)
    (h.state / "buckets" / bucket / prefix / "sub").mkdir(parents=True)
    (h.state / "buckets" / bucket / prefix / "a.bin").write_bytes(b"x" * 3000)
    (h.state / "buckets" / bucket / prefix / "sub/b.bin").write_bytes(b"y" * 5)
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    venv = h.path(f"/opt/trainvm/datatools/{scheme}")
    installs = [c for c in run.lines("uv") if str(venv) in c]
    assert installs == [f"uv venv -q --python /usr/bin/python3 {venv}",
                        f"uv pip install -q --python {venv}/bin/python --require-hashes --only-binary :all: -r "
                        f"{h.path(f'/var/lib/trainvm/datatools-{scheme}.txt')}"]
    assert (venv / ".trainvm-lock").read_text().strip() == hashlib.sha256(lock_text(scheme).encode()).hexdigest()
    assert [c for c in run.lines("sdk") if " list " in c] == [f"sdk {scheme} list {bucket} {prefix}"]
    assert "credential" not in " ".join(run.lines("sdk")) and not h.path("/etc/trainvm/credentials").exists()
    assert (h.path("/mnt/data/glue/a.bin").stat().st_size, h.path("/mnt/data/glue/sub/b.bin").read_bytes()) == (3000, b"yyyyy")
    assert run.report["data"] == [{"dest": "/mnt/data/glue", "status": "staged"}]
    assert not run.named("gcloud") and not run.named("aws") and not run.named("azcopy")
    # a re-run (GCE: every boot; `trainvm start`): the marker matches, nothing installed, nothing copied
    h.reboot()
    again = h.run()
    assert again.status == "ready" and again.installs() == [] and not again.named("sdk")


def test_cross_cloud_source_with_a_credential_from_the_vms_own_store(make_harness):
    """gs:// on AWS with secret://aws/...: the instance profile reads Secrets Manager through boto3 of the s3 tool's
    venv (installed by the env phase although no data is s3://; botocore reads the role's keys from IMDSv2), the
    key lands in a 0600 file that the copier gets, and its content never reaches the log."""
    data = [{"source": "gs://corpus-bkt/glue/", "dest": "/mnt/data/glue", "credential": "secret://aws/data/gcs-reader"}]
    h = make_harness(render(data, "aws"), cloud="aws", STUB_SECRETS=json.dumps({"aws/data/gcs-reader": json.dumps(KEY, indent=2)}))
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    cred = h.path("/etc/trainvm/credentials/data-0")
    assert json.loads(cred.read_text()) == KEY
    assert stat.S_IMODE(cred.stat().st_mode) == 0o600 and stat.S_IMODE(cred.parent.stat().st_mode) == 0o700
    assert "sdk gs client key=reader@other-proj.iam.gserviceaccount.com" in run.lines("sdk")
    assert run.lines("secretsmanager") == ["secretsmanager GetSecretValue data/gcs-reader"]
    assert "sdk s3 client secretsmanager key=iam-role" in run.lines("sdk")  # the instance role, from IMDSv2
    assert "http PUT http://169.254.169.254/latest/api/token" in run.lines("http")
    assert h.path("/opt/trainvm/datatools/s3/.trainvm-lock").exists() and h.path("/opt/trainvm/datatools/gs/.trainvm-lock").exists()
    assert not [c for c in run.lines("curl") if "--aws-sigv4" in c or "amazonaws.com" in c]
    assert not run.named("aws")  # no AWS CLI
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" not in h.path("/var/log/trainvm/provision.log").read_text()


# ---------------------------------------------------------------------------- the AWS SDK venv (boto3 of the s3 tool)
S3_VENV = "/opt/trainvm/datatools/s3"


def aws_render(data=(), env=None, container=False, **lifecycle) -> str:
    base = S.container_profile() if container else S.minimal_profile()
    doc = {**base, "data": list(data)}
    if env:
        doc["stack"] = {**doc["stack"], "env": {**doc["stack"].get("env", {}), **env}}
    if lifecycle:
        doc["lifecycle"] = lifecycle
    return S.render(S.from_dict(doc), "aws").startup_sh


def order(run, *prefixes: str) -> list[int]:
    """The index of the first call starting with each prefix (all present)."""
    lines = [c.line for c in run.calls]
    found = [next((i for i, ln in enumerate(lines) if ln.startswith(p)), -1) for p in prefixes]
    assert -1 not in found, (prefixes, found, lines)
    return found


HTTPS = [{"source": "https://data.example.com/files/set.tar", "dest": "/mnt/data/set"}]
MIXED = {"idle_shutdown_minutes": 60, "on_idle": "delete", "max_run_hours": 2, "on_max_run": "stop"}


@pytest.mark.parametrize("trigger", ["secret-aws-env", "mixed-lifecycle", "s3-data", "container-secret-aws"])
def test_an_aws_vm_that_calls_an_aws_api_installs_the_s3_tool_venv_in_the_env_phase(make_harness, trigger):
    """Every AWS API call of the VM is boto3 of the s3 tool's hash-locked venv: installed (the same lock, the same
    uv, the same marker) at the start of the env phase, before the secrets are read, for each trigger alone."""
    kw = {"secret-aws-env": dict(data=HTTPS, env={"HF_TOKEN": "secret://aws/hf/token"}),
          "mixed-lifecycle": dict(data=HTTPS, **MIXED),
          "s3-data": dict(data=[{"source": "s3://corpus-bkt/glue/", "dest": "/mnt/data/glue"}]),
          "container-secret-aws": dict(container=True, data=HTTPS, env={"HF_TOKEN": "secret://aws/hf/token"})}[trigger]
    h = make_harness(aws_render(**kw), cloud="aws", STUB_SECRETS=json.dumps({"aws/hf/token": "hf_from_sm"}))
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    venv = h.path(S3_VENV)
    installs = [c for c in run.lines("uv") if str(venv) in c]
    assert installs == [f"uv venv -q --python /usr/bin/python3 {venv}",
                        f"uv pip install -q --python {venv}/bin/python --require-hashes --only-binary :all: -r "
                        f"{h.path('/var/lib/trainvm/datatools-s3.txt')}"]
    assert (venv / ".trainvm-lock").read_text().strip() == hashlib.sha256(lock_text("s3").encode()).hexdigest()
    assert re.search(r"trainvm env: installed the s3 SDK venv ", run.output), run.output[-3000:]
    if trigger.endswith("secret-aws-env") or trigger == "container-secret-aws":
        uv_venv, sm = order(run, f"uv venv -q --python /usr/bin/python3 {venv}", "secretsmanager GetSecretValue hf/token")
        assert uv_venv < sm
        assert 'HF_TOKEN="hf_from_sm"' in h.path("/etc/trainvm/secrets.env").read_text()
    if trigger == "container-secret-aws":
        assert not h.path("/opt/trainvm/venv").exists() and "uv --version" in run.lines("uv")
    if trigger == "s3-data":
        assert [c for c in run.lines("sdk") if " list " in c] == ["sdk s3 list corpus-bkt glue/"]
    # a re-run: the marker matches, nothing installed
    h.reboot()
    again = h.run()
    assert again.status == "ready" and again.installs() == []


@pytest.mark.parametrize("case", ["aws-https-uniform", "gcp-secret-gcp", "azure-s3-credential"])
def test_no_aws_api_no_sdk_venv(make_harness, case):
    """An AWS VM without s3:// data, secret://aws/ or a mixed lifecycle calls no AWS API and installs no SDK;
    neither does a VM on another cloud (s3:// there is read with a credential file, not the instance profile)."""
    if case == "aws-https-uniform":
        script, cloud = aws_render(data=HTTPS, env={"A": "b"}, idle_shutdown_minutes=60, on_idle="delete",
                                   max_run_hours=2, on_max_run="delete"), "aws"
    elif case == "gcp-secret-gcp":
        doc = {**S.minimal_profile(env={"HF_TOKEN": "secret://gcp/hf"}), "data": HTTPS}
        script, cloud = S.render(S.from_dict(doc), "gcp").startup_sh, "gcp"
    else:
        script = render([{"source": "s3://corpus-bkt/glue/", "dest": "/mnt/data/glue",
                          "credential": "secret://azure-keyvault/kv1/s3-reader"}], "azure")
        cloud = "azure"
    env_phase = script[script.index("phase_env() {"):script.index("\n}\n", script.index("phase_env() {"))]
    assert "tv_datatool" not in env_phase
    h = make_harness(script, cloud=cloud, STUB_SECRETS=json.dumps(
        {"azure-keyvault/kv1/s3-reader": json.dumps({"aws_access_key_id": "AKIAX", "aws_secret_access_key": "y" * 40})}))
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    assert "trainvm env: installed" not in run.output
    assert h.path(S3_VENV).exists() is (case == "azure-s3-credential")  # there: the data phase's copy tool only
    assert not run.named("secretsmanager") and not run.named("ec2")


def test_an_aws_call_without_the_sdk_venv_is_a_clear_failure(make_harness):
    """The venv gone when needed (here: removed after provisioning): the helper says so and fails; nothing signs
    by hand, nothing calls AWS another way."""
    h = make_harness(aws_render(data=HTTPS, env={"HF_TOKEN": "secret://aws/hf/token"}), cloud="aws")
    assert h.run().status == "ready"
    import shutil
    import subprocess

    shutil.rmtree(h.path(S3_VENV))
    (h.state / "calls.log").unlink(missing_ok=True)
    r = subprocess.run(["python3", str(h.path("/var/lib/trainvm/lib/trainvm_helper.py")), "env"], env=h.env(),
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "env HF_TOKEN: Secrets Manager GetSecretValue failed: the AWS SDK (boto3 in /opt/trainvm/datatools/s3) is not installed" in r.stderr
    assert not [ln for ln in (h.state / "calls.log").read_text().splitlines() if ln.startswith(("secretsmanager", "curl"))]


def test_credential_contents_are_redacted_from_the_console(make_harness):
    data = [{"source": "s3://corpus-bkt/glue/", "dest": "/mnt/data/glue", "credential": "secret://gcp/s3-reader"}]
    keys = {"aws_access_key_id": "AKIAREADEREXAMPLE01", "aws_secret_access_key": "rEaDeRsEcReTkEy0123456789abcdefGHIJKLMN"}
    # the copier fails with a message that quotes the key (an SDK error could): the console must not show it
    h = make_harness(render(data, "gcp"), STUB_SECRETS=json.dumps({"gcp/s3-reader": json.dumps(keys)}),
                     STUB_SDK_FAIL_WITH=keys["aws_secret_access_key"])
    run = h.run()
    assert re.fullmatch(r"failed:data:\d+", run.status), run.output[-2000:]
    assert "sdk s3 client s3 key=AKIAREADEREXAMPLE01" in run.lines("sdk")
    assert keys["aws_secret_access_key"] not in run.output and keys["aws_secret_access_key"] not in json.dumps(run.report)
    assert keys["aws_secret_access_key"] not in h.path("/var/log/trainvm/provision.log").read_text()
    assert "***" in run.output


def test_unreadable_credential_fails_the_data_phase_with_the_reference(make_harness):
    data = [{"source": "s3://corpus-bkt/glue/", "dest": "/mnt/data/glue", "credential": "secret://gcp/missing"}]
    h = make_harness(render(data, "gcp"), STUB_SECRETS=json.dumps({"gcp/missing": None}))
    run = h.run()
    assert re.fullmatch(r"failed:data:\d+", run.status)
    assert "data[0].credential secret://gcp/missing could not be read with this VM's identity" in run.report["error"]
    assert not h.path("/etc/trainvm/credentials/data-0").exists() and not run.named("sdk")


def test_source_the_cloud_cannot_read_stops_at_preflight_before_installing_anything(make_harness):
    h = make_harness(render([{"source": "gs://corpus-bkt/glue/", "dest": "/mnt/data/glue"}], "azure"), cloud="azure")
    run = h.run()
    # the watchdog is armed first (a failed VM stops when idle), then preflight fails before anything is installed
    assert re.fullmatch(r"failed:data:\d+", run.status) and run.statuses[:2] == ["running:watchdog", "running:preflight"]
    assert "is read natively only on gcp; a VM on azure needs data[].credential" in run.report["error"]
    assert run.installs() == [] and not run.named("sdk")
    assert set(run.report["phases"]) == {"watchdog", "preflight"}


def test_short_object_fails_after_retries(make_harness):
    h = make_harness(render([{"source": "gs://corpus-bkt/glue/", "dest": "/mnt/data/glue"}]), STUB_SDK_SHORT="1")
    run = h.run()
    assert re.fullmatch(r"failed:data:\d+", run.status)
    assert "glue/part-00000: 1023 of 1024 bytes" in run.output
    assert len([c for c in run.lines("sdk") if " list " in c]) == 3  # tv_retry: three attempts


def test_container_stack_installs_uv_for_the_copy_tool(make_harness):
    """A container stack has no python phase: the data phase installs the pinned uv itself."""
    h = make_harness(render([{"source": "gs://corpus-bkt/glue/", "dest": "/mnt/data/glue"}], container=True))
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    assert [c for c in run.lines("curl") if c.endswith(".whl")] and "uv --version" in run.lines("uv")
    assert not h.path("/opt/trainvm/venv").exists()  # no stack venv
    assert h.path("/opt/trainvm/datatools/gs/.trainvm-lock").exists()


def test_https_only_profile_renders_no_copy_tool():
    script = render([{"source": "https://example.com/files/set.tar", "dest": "/mnt/data/set"}])
    assert "tv_datatool" not in script and "trainvm_copy" not in script
    container = render([{"source": "https://example.com/files/set.tar", "dest": "/mnt/data/set"}], container=True)
    assert "tv_install_uv" not in container  # nothing to install uv for
