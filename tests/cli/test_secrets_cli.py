"""The secret corpus through the CLI: each format under a neutral env key, in a data URL and in a lock file
is rejected (exit 1), the message does not repeat it, and `trainvm render --out` writes nothing with it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.unit.test_secrets import CORPUS

T4 = (REPO / "profiles" / "examples" / "bert-finetune-t4.yaml").read_text()
LOCK = "numpy==1.26.4 \\\n    --hash=sha256:" + "ab" * 32 + "\n"


def profile(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "p.yaml"
    p.write_text(text)
    return p


def quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_secret_under_a_neutral_env_key_is_rejected_and_never_rendered(cli, tmp_path, name):
    value = CORPUS[name]
    p = profile(tmp_path, T4.replace("stack:\n", f"stack:\n  env:\n    MODEL_SETTING: {quoted(value)}\n", 1))
    for cloud in ("gcp", "azure"):
        out = tmp_path / f"out-{cloud}"
        r = cli("render", str(p), "--cloud", cloud, "--out", str(out))
        assert r.code == 1, (name, r.err)
        assert "MODEL_SETTING" in r.err and "looks like" in r.err
        assert value not in r.err and value not in r.out
        rendered = [f.read_text(errors="replace") for f in out.rglob("*") if f.is_file()] if out.exists() else []
        assert not any(value in text for text in rendered)


@pytest.mark.parametrize("name", ["azure_sas_url", "gcs_signed_url", "s3_presigned", "token_param"])
def test_signed_data_url_is_rejected_and_redacted(cli, tmp_path, name):
    value = CORPUS[name]
    p = profile(tmp_path, T4.replace('gs://example-ml-data/glue/', value.replace("https://", "https://")))
    r = cli("validate", str(p))
    assert r.code == 1 and "data" in r.err, r.err
    query = value.split("?", 1)[1]
    assert query not in r.err


def test_data_url_with_userinfo_is_rejected_and_redacted(cli, tmp_path):
    p = profile(tmp_path, T4.replace('gs://example-ml-data/glue/', "https://user:hunter2@data.example.com/glue/"))
    r = cli("validate", str(p))
    assert r.code == 1 and "hunter2" not in r.err and "***" in r.err, r.err


@pytest.mark.parametrize("line", ["--index-url https://__token__:pypi-s3cr3tvalue@pypi.example.com/simple",
                                  "--extra-index-url https://user:hunter2@pypi.example.com/simple"])
def test_lock_file_with_credentials_is_rejected(cli, tmp_path, line):
    (tmp_path / "requirements.lock").write_text(line + "\n" + LOCK)
    p = profile(tmp_path, T4.replace("  packages:", "  requirements: requirements.lock\n  packages:", 1))
    r = cli("validate", str(p))
    assert r.code == 1 and "requirements.lock" in r.err, r.err
    assert "s3cr3tvalue" not in r.err and "hunter2" not in r.err


def test_bundled_profiles_pass(cli):
    paths = sorted(str(p) for p in (REPO / "profiles").rglob("*.yaml"))
    r = cli("validate", *paths)
    assert r.code == 0, r.err


def test_aws_secret_key_as_s3_path_segments_is_rejected_and_never_echoed(cli, tmp_path):
    from tests.unit.test_secrets import AWS_SECRET

    p = profile(tmp_path, T4.replace('gs://example-ml-data/glue/', f"s3://my-bucket/{AWS_SECRET}/glue/"))
    r = cli("validate", str(p))
    assert r.code == 1, r.err
    assert "data[0].source" in r.err and "an AWS secret access key (in the URL's path)" in r.err
    assert AWS_SECRET not in r.err and AWS_SECRET not in r.out and "s3://my-bucket/***/glue/" in r.err


@pytest.mark.parametrize(("key", "value"), [
    ("WEIGHTS_SHA256", hashlib.sha256(b"weights").hexdigest()),  # a digest under a key that says so
    ("MODEL_DIGEST", hashlib.sha256(b"model").hexdigest()),
    ("BASE_IMAGE", "nvcr.io/nvidia/pytorch:24.08-py3@sha256:" + hashlib.sha256(b"image").hexdigest()),
    ("HF_MODEL", "meta-llama/Meta-Llama-3-8B-Instr"),  # 32 characters, the length of a legacy Azure secret
    ("DOCKER_SETTINGS", '{"registry-mirrors": ["https://mirror.example.com"]}'),
    ("HF_MODEL_GPTQ", "TheBloke/Mistral-7B-Instruct-v0.2-GPTQ"),  # mixed classes, high entropy: still a name
])
def test_digests_and_names_where_they_belong_pass(cli, tmp_path, key, value):
    (tmp_path / "requirements.lock").write_text("numpy==1.26.4 \\\n    --hash=sha256:" + hashlib.sha256(b"wheel").hexdigest() + "\n")
    text = T4.replace("stack:\n", f"stack:\n  env:\n    {key}: {quoted(value)}\n", 1)
    p = profile(tmp_path, text.replace("  packages:", "  requirements: requirements.lock\n  packages:", 1))
    r = cli("validate", str(p))
    assert r.code == 0 and "looks like" not in r.err, r.err


def test_a_64_hex_value_is_rejected_under_a_neutral_key_naming_the_field(cli, tmp_path):
    value = hashlib.sha256(b"a generated secret").hexdigest()
    p = profile(tmp_path, T4.replace("stack:\n", f"stack:\n  env:\n    MODEL_SETTING: {quoted(value)}\n", 1))
    r = cli("validate", str(p))
    assert r.code == 1 and "stack.env" in r.err and "MODEL_SETTING" in r.err and "64-hex" in r.err, r.err
    assert value not in r.err


@pytest.mark.parametrize("packages", [
    '"torch==2.4.1+cu124 --extra-index-url {secret}"',  # a string where a list belongs
    "[torch==2.4.1+cu124, {{pin: numpy==1.26.4, extra_index_credentials: \"{secret}\"}}]",  # a mapping where a pin belongs
    '[torch==2.4.1+cu124, "numpy==1.26.4 --index {secret}"]',
], ids=["string", "mapping", "pin"])
def test_a_rejected_pin_never_echoes_a_secret_looking_value(cli, tmp_path, packages):
    from tests.unit.test_secrets import AWS_SECRET

    text = T4.split("  packages:")[0] + f"  packages: {packages.format(secret=AWS_SECRET)}\n"
    r = cli("validate", str(profile(tmp_path, text)))
    assert r.code == 1 and "stack.packages" in r.err and "looks like an AWS secret access key" in r.err, r.err
    assert AWS_SECRET[:12] not in r.err and AWS_SECRET[:12] not in r.out  # not even a cut-short part of it


def test_an_older_azure_client_secret_is_named_at_its_line(cli, tmp_path):
    value = CORPUS["azure_client_secret_legacy33"]
    p = profile(tmp_path, T4.replace("stack:\n", f"stack:\n  env:\n    LOGIN_VALUE: {quoted(value)}\n", 1))
    r = cli("validate", str(p))
    assert r.code == 1 and value not in r.err and value not in r.out, r.err
    line = T4.splitlines().index("stack:") + 3
    assert f"p.yaml:{line}: stack.env.LOGIN_VALUE: the value looks like a random token" in r.err, r.err
