"""The secret corpus through the CLI: each format under a neutral env key, in a data URL and in a lock file
is rejected (exit 1), the message does not repeat it, and `trainvm render --out` writes nothing with it."""

from __future__ import annotations

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
