"""Secret detection by format and entropy (provisioner.secrets): a corpus of credential formats, every one
found whatever key it sits under, and redacted; ordinary values (paths, versions, pins, digests) pass."""

from __future__ import annotations

import base64
import hashlib
import json
import random

import pytest

from provisioner.secrets import find_secret, redact

SA_JSON = json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "0123456789abcdef",
                      "client_email": "x@p.iam.gserviceaccount.com"})
# Built from parts so that the test file itself does not look like a leaked credential to scanners.
F = "".join
AWS_SECRET = F(["wJalrXUtnFEMI/K7MDENG/bPxRfi", "CYEXAMPLEKEY"])
# an STS session token: base64 of "!\n\torigin_ec..." and a binary blob (real ones are 400-1,200 characters)
SESSION_TOKEN = base64.b64encode(b"!\n\torigin_ec" + random.Random(30).randbytes(420)).decode()
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
    "aws_session_token": SESSION_TOKEN,
    # the legacy Azure AD client-secret formats (Microsoft security-utilities SEC101/101): 32 of [A-Za-z0-9.=-:[_@/*]+?]
    # and 34 URL-unreserved characters, each with a symbol
    "azure_client_secret_legacy32": F(["x2q:A?V.@l-b]Pn5", "sZsC1e0U-lQkW6J7"]),
    "azure_client_secret_legacy34": F(["Zk8.Qa-Tb3~nR5_w", "E1xLp9Yc2Vd7Hs4Gj6"]),
    # an older Azure AD client secret of neither legacy length: 33 random characters mixing letters, digits and .-@[]:
    "azure_client_secret_legacy33": F(["k3J.Xz-9q@R[tY]w0", ":pL8sV2nB6mC4dF1"]),
    "hex64": hashlib.sha256(b"a generated secret").hexdigest(),
    "aws_secret_in_s3_path": f"s3://my-bucket/{AWS_SECRET}/train/",
    "docker_config_json": json.dumps({"auths": {"registry.example.com": {"auth": base64.b64encode(b"user:pass").decode()}}}),
    "docker_config_json_base64": base64.b64encode(json.dumps(
        {"auths": {"registry.example.com": {"auth": base64.b64encode(b"user:pass").decode()}}}).encode()).decode(),
}
ORDINARY = ["/mnt/data/imagenet", "12.4", "550.127.05", "torch==2.4.1+cu124", ":4096:8", "1", "true", "bert-base-uncased",
            "https://download.pytorch.org/whl/cu124", "gs://my-bucket/corpus/", "en_US.UTF-8", "0,1,2,3",
            "--hash=sha256:" + "0123456789abcdef" * 4, "nvidia-cudnn-cu12==9.1.0.70", "expandable_segments:True",
            "s3://open-data/imagenet/train/", "https://huggingface.co/datasets/wikitext", "WARN", "my-project-123456",
            # digests where they belong (a lock's --hash, an image digest), and names of the legacy Azure lengths (32, 34)
            "--hash=sha256:" + hashlib.sha256(b"wheel").hexdigest(),
            "nvcr.io/nvidia/pytorch@sha256:" + hashlib.sha256(b"image").hexdigest(),
            "nvcr.io/nvidia/pytorch:24.05-py3", "meta-llama/Meta-Llama-3-8B-Instr", "mistralai/Mistral-7B-Instruct-v0.2",
            "/mnt/data/Imagenet2012/train_set", "datasets/ImageNet-1K/v2/shards/00", "Qwen/Qwen2.5-7B-Instruct-AWQ:v12",
            "2024-01-01T00:00:00.0000000Z", "s3://open-data/imagenet/ILSVRC2012/train/n01440764/abcd/",
            "gs://corpus/ImageNet/train/shards/part-00001-of-0128/", "s3://lm/Llama3/checkpoints/step4000/model00001of/x",
            json.dumps({"auths": {}}), '{"registry-mirrors": ["https://mirror.example.com"]}',
            # real model repositories and paths whose letters, digits and capitals mix (entropy alone took some for keys)
            "TheBloke/Mistral-7B-Instruct-v0.2-GPTQ", "TheBloke/CodeLlama-34B-Instruct-AWQ", "HuggingFaceH4/zephyr-7b-beta",
            "ghcr.io/BEST/Attention:24.05-py3", "deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct", "microsoft/Phi-3-mini-4k-instruct",
            "https://huggingface.co/TheBloke/Llama-2-7B-GGUF/resolve/main/llama-2-7b.Q4_K_M.gguf",
            "s3://my-bucket/ImageNet/ILSVRC2012_img_train/", "/mnt/data/StableDiffusionXL/Base1.0/unet",
            "MODEL=NousResearch/Meta-Llama-3-8B-Instruct", "HuggingFaceH4/Llama-0.5B-v2.8"]


def test_corpus_has_at_least_30_formats():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_format_is_found_and_redacted(name):
    value = CORPUS[name]
    assert find_secret(value), name
    assert find_secret(f"prefix {value} suffix"), name  # inside a longer text too
    if name not in ("hex40", "hex64"):  # commit ids, digests and hashes in messages stay readable (redact's docstring)
        red = redact(f"failed: curl {value}")
        assert value not in red and "***" in red, red


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_values_pass(value):
    assert find_secret(value) is None
    assert redact(value) == value


def test_redact_keeps_url_path_but_not_query_or_password():
    assert redact("GET https://h.example/a/b?X-Amz-Signature=abc&x=1 failed") == "GET https://h.example/a/b?*** failed"
    assert redact("postgres://u:pw@db/app") == "postgres://***@db/app"


def test_a_random_token_after_an_equals_sign_is_found():
    token = CORPUS["azure_client_secret_legacy33"]
    assert find_secret(f"--client-secret={token}") and find_secret(f"AZURE_CLIENT_SECRET={token}")
    assert redact(f"az login --password={token} failed") == "az login --password=*** failed"
