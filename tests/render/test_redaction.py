"""Issue 19: what the script prints reaches the console (readable by anyone with project access,
and by `trainvm logs`) and /var/log/trainvm/provision.log only through the helper's redact filter:
URL userinfo, URL query strings (signed URLs), signature/token parameters, bearer tokens and the
values of secrets.env are replaced by ***; the report's error is redacted the same way."""

from __future__ import annotations

import json

import pytest
import trainvm_render_support as S

from tests.helpers import load_helper

SECRETS = ["hunter2pass", "deadbeefsig0123", "AKIAEXAMPLEKEY99", "s3cr3t-from-gcp", "sv%3Dsecretsas", "eyJhbGciOi.payload.sig"]


@pytest.fixture(scope="module")
def helper():
    return load_helper("trainvm_helper_under_test")


@pytest.mark.parametrize("line, gone", [
    ("curl -o x https://user:hunter2pass@example.com/a.tar", "hunter2pass"),
    ("fetch https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4&X-Goog-Signature=deadbeefsig0123", "deadbeefsig0123"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIAEXAMPLEKEY99%2F2026&X-Amz-Signature=ab12", "AKIAEXAMPLEKEY99"),
    ("azcopy copy 'https://acct.blob.core.windows.net/c/p?sv=2022&sig=deadbeefsig0123' /mnt", "deadbeefsig0123"),
    ("--sas sig=deadbeefsig0123 token=deadbeefsig0123", "deadbeefsig0123"),
    ("-H 'Authorization: Bearer eyJhbGciOi.payload.sig'", "eyJhbGciOi.payload.sig"),
    ("postgres://admin:hunter2pass@db:5432/x", "hunter2pass"),
])
def test_redact_removes_credentials_from_a_line(helper, line, gone):
    out = helper.redact(line)
    assert gone not in out and "***" in out


@pytest.mark.parametrize("line", ["gs://example-ml-data/bert-corpus/ -> /mnt/data/corpus", "https://pypi.org/simple",
                                  "TRAINVM_STATUS=running:data", "apt-get -y -q -o DPkg::Lock::Timeout=600 install nvidia-open=550.127.05-0ubuntu1"])
def test_redact_leaves_ordinary_lines_alone(helper, line):
    assert helper.redact(line) == line


def test_known_secret_values_are_redacted_anywhere(helper, tmp_path, monkeypatch):
    assert helper.redact("got s3cr3t-from-gcp in a path") == "got s3cr3t-from-gcp in a path"
    (tmp_path / "etc/trainvm").mkdir(parents=True)
    (tmp_path / "etc/trainvm/secrets.env").write_text('# trainvm\nHF_TOKEN="s3cr3t-from-gcp"\nQ="a\\"b\\$c"\nX="ab"\n')
    monkeypatch.setattr(helper, "ROOT", str(tmp_path))
    assert helper.redact("got s3cr3t-from-gcp and a\"b$c, ab") == "got *** and ***, ab"


@pytest.mark.parametrize("cloud", ["gcp", "aws"])
def test_a_failing_copy_prints_no_secret(make_harness, cloud):
    """A data source URL carrying userinfo, a signed query and a secret.env value fails three
    times: the attempts and the failure are logged, but no secret reaches the console, the log,
    the report or status.json."""
    url = ("https://user:hunter2pass@example.com/s3cr3t-from-gcp/d.bin?X-Amz-Credential=AKIAEXAMPLEKEY99"
           "&X-Amz-Signature=deadbeefsig0123&sig=sv%3Dsecretsas")
    data = S.minimal_profile(env={"PYTHONHASHSEED": "0", "HF_TOKEN": "secret://gcp/hf-token",
                                  "AUTH": "Bearer eyJhbGciOi.payload.sig"})
    data["data"] = [{"source": url, "dest": "/mnt/data/d"}]
    lp = S.from_dict(data, validate=False)
    h = make_harness(S.render(lp, cloud).startup_sh, cloud=cloud, STUB_CURL_FAIL="example.com")
    run = h.run()
    assert run.rc != 0 and run.status.startswith("failed:data:"), run.output[-3000:]
    log = h.path("/var/log/trainvm/provision.log").read_text()
    assert "attempt 1 of 3 failed: curl" in run.output and "***" in run.output and "failed 3 times" in log
    assert "example.com" in run.report["error"] and "***" in run.report["error"]
    status = h.path("/var/lib/trainvm/status.json").read_text()
    for text in (run.output, log, json.dumps(run.report), status):
        for secret in SECRETS:
            assert secret not in text
    # the copy really was asked for the full URL: redaction is on output only
    assert any(url in c.args for c in run.named("curl"))
