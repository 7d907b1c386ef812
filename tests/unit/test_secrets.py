"""Secret detection by format and entropy (provisioner.secrets): a corpus of credential formats, every one
found whatever key it sits under, and redacted; ordinary values (paths, versions, pins, digests) pass."""

from __future__ import annotations

import base64
import json

import pytest

from provisioner.secrets import find_secret, redact

SA_JSON = json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "0123456789abcdef",
                      "client_email": "x@p.iam.gserviceaccount.com"})
# Built from parts so that the test file itself does not look like a leaked credential to scanners.
F = "".join
CORPUS = {
    "aws_access_key_id": F(["AKIA", "IOSFODNN7EXAMPLE"]),
    "aws_secret": F(["wJalrXUtnFEMI/K7MDENG/bPxRfi", "CYEXAMPLEKEY"]),
    "private_key_pem": F(["-----BEGIN ", "RSA PRIVATE KEY-----MIIEow"]),
    "openssh_key": F(["-----BEGIN ", "OPENSSH PRIVATE KEY-----b3BlbnNzaC1rZXktdjE"]),
    "pgp_key": F(["-----BEGIN PGP ", "PRIVATE KEY BLOCK-----"]),
    "sa_json": SA_JSON,
    "sa_json_base64": base64.b64encode(SA_JSON.encode()).decode(),
    "github_pat": F(["ghp_", "1234567890abcdefghijABCDEFGHIJ123456"]),
    "github_fine": F(["github_pat_", "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGH"]),
    "gitlab": F(["glpat-", "xxxxXXXX1234yyyyZZZZ"]),
    "hf": F(["hf_", "abcdefghijklmnopqrstuvwxyzABCDEFGH"]),
    "openai": F(["sk-", "proj-abcdefghijklmnopqrstuvwxyz012345"]),
    "anthropic": F(["sk-", "ant-api03-abcdefghijklmnopqrstuvwxyz"]),
    "stripe": F(["sk_", "live_4eC39HqLyjWDarjtT1zdp7dc"]),
    "slack_token": F(["xox", "b-123456789012-abcdefghijkl"]),
    "slack_webhook": F(["https://hooks.slack.com/services/", "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"]),
    "google_api_key": F(["AIza", "SyA1234567890abcdefghijklmnopqrstuv"]),
    "google_oauth": F(["ya29.", "a0AfH6SMBabcdefghijklmnopqrstuvwxyz"]),
    "jwt": F(["eyJhbGciOiJIUzI1NiJ9", ".eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnopqrstuv"]),
    "azure_storage_conn": F(["DefaultEndpointsProtocol=https;AccountName=acct;", "AccountKey=", "abcdefghijklmnopqrstuvwxyz0123456789ABCD=="]),
    "azure_client_secret": F(["abc8Q~", "abcdefghijklmnopqrstuvwxyz0123456789"]),
    "azure_sas_url": "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&se=2026-12-01&sig=" + F(["abcdEFGH1234", "%2Bxyz%3D"]),
    "gcs_signed_url": "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=" + "ab12" * 16,
    "s3_presigned": "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=" + "cd34" * 16,
    "token_param": "https://example.com/dataset.tar?token=abc123",
    "postgres_url": "postgres://user:hunter2@db.example.com:5432/app",
    "index_url_token": "--index-url https://__token__:pypi-secret@pypi.example.com/simple",
    "redis_url": "redis://:p4ssw0rd@cache:6379/0",
    "hex40": "0123456789abcdef0123456789abcdef01234567",
    "npm": F(["npm_", "abcdefghijklmnopqrstuvwxyz0123456789"]),
    "pypi": F(["pypi-", "AgEIcHlwaS5vcmcCJDEyMzQ1Njc4LTEyMzQtMTIzNC0xMjM0LTEyMzQ1Njc4OTAxMg"]),
    "sendgrid": F(["SG.", "abcdefghijklmnopqrstuv.", "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"]),
    "databricks": F(["dapi", "0123456789abcdef0123456789abcdef"]),
    "bearer": F(["Bearer ", "abcdefghijklmnop1234567890"]),
    "random_base64": "q8Zr3VfT0pLw9XyBn2KcMa7Hd5Js1Gu4",
}
ORDINARY = ["/mnt/data/imagenet", "12.4", "550.127.05", "torch==2.4.1+cu124", ":4096:8", "1", "true", "bert-base-uncased",
            "https://download.pytorch.org/whl/cu124", "gs://my-bucket/corpus/", "en_US.UTF-8", "0,1,2,3",
            "--hash=sha256:" + "0123456789abcdef" * 4, "nvidia-cudnn-cu12==9.1.0.70", "expandable_segments:True",
            "s3://open-data/imagenet/train/", "https://huggingface.co/datasets/wikitext", "WARN", "my-project-123456"]


def test_corpus_has_at_least_30_formats():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_format_is_found_and_redacted(name):
    value = CORPUS[name]
    assert find_secret(value), name
    assert find_secret(f"prefix {value} suffix"), name  # inside a longer text too
    if name != "hex40":  # commit ids in messages stay readable (redact's docstring)
        red = redact(f"failed: curl {value}")
        assert value not in red and "***" in red, red


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_values_pass(value):
    assert find_secret(value) is None
    assert redact(value) == value


def test_redact_keeps_url_path_but_not_query_or_password():
    assert redact("GET https://h.example/a/b?X-Amz-Signature=abc&x=1 failed") == "GET https://h.example/a/b?*** failed"
    assert redact("postgres://u:pw@db/app") == "postgres://***@db/app"
