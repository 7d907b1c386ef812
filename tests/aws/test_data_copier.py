"""The data copier (templates/files/trainvm_copy.py) through the real boto3 against moto's S3
server, with a credential file as the VM writes it (0600, fetched from the secret store); and the
hash-pinned locks of the copy tools (templates/datatools/, scripts/datatools_lock.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

COPIER = REPO / "templates/files/trainvm_copy.py"
LOCKS = REPO / "templates/datatools"
TOP = {"gs": "google-cloud-storage", "s3": "boto3", "az": "azure-storage-blob"}
LINE = re.compile(r"^[a-z0-9][a-z0-9._-]*==[^\s]+ --hash=sha256:[0-9a-f]{64}$")


def _copy(aws, *args: str):
    env = {"PATH": os.environ["PATH"], "AWS_ENDPOINT_URL_S3": aws.moto_url, "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_EC2_METADATA_DISABLED": "true"}
    return subprocess.run([sys.executable, str(COPIER), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def bucket(aws):
    s3 = aws.client("s3", direct=True)
    s3.create_bucket(Bucket="corpus-bkt")
    s3.put_object(Bucket="corpus-bkt", Key="corpus/a.txt", Body=b"hello")
    s3.put_object(Bucket="corpus-bkt", Key="corpus/sub/b.bin", Body=os.urandom(70_000))
    s3.put_object(Bucket="corpus-bkt", Key="other/c.txt", Body=b"not this")
    return s3


def test_copier_copies_a_prefix_with_a_credential_file(aws, bucket, tmp_path):
    cred = tmp_path / "cred.json"
    cred.write_text(json.dumps({"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret-example"}))
    cred.chmod(0o600)
    dest = tmp_path / "data"
    run = _copy(aws, "s3://corpus-bkt/corpus/", str(dest), str(cred))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "2 files, 70005 bytes"
    assert (dest / "a.txt").read_bytes() == b"hello" and (dest / "sub/b.bin").stat().st_size == 70_000
    assert not (dest / "c.txt").exists() and not list(dest.rglob("*.trainvm-part"))
    # a re-run keeps what is complete and fetches what is missing
    (dest / "a.txt").unlink()
    before = (dest / "sub/b.bin").stat().st_mtime_ns
    again = _copy(aws, "s3://corpus-bkt/corpus/", str(dest), str(cred))
    assert again.returncode == 0 and (dest / "a.txt").read_bytes() == b"hello"
    assert (dest / "sub/b.bin").stat().st_mtime_ns == before


def test_copier_fails_on_an_empty_prefix_and_a_foreign_scheme(aws, bucket, tmp_path):
    cred = tmp_path / "cred.json"
    cred.write_text(json.dumps({"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret-example"}))
    empty = _copy(aws, "s3://corpus-bkt/nothing-here/", str(tmp_path / "d"), str(cred))
    assert empty.returncode == 1 and "nothing under s3://corpus-bkt/nothing-here/" in empty.stderr
    assert _copy(aws, "ftp://host/x", str(tmp_path / "d")).returncode == 2


def test_copier_takes_a_prefix_as_a_folder_not_as_the_start_of_a_name(aws, bucket, tmp_path):
    """s3://corpus-bkt/corpus (no trailing slash) is the folder corpus/, as gcloud storage rsync and aws s3 sync
    read it: corpus-old/ beside it is not copied (found by make test-os: it landed as DEST/-old/...)."""
    bucket.put_object(Bucket="corpus-bkt", Key="corpus-old/d.txt", Body=b"beside")
    cred = tmp_path / "cred.json"
    cred.write_text(json.dumps({"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret-example"}))
    dest = tmp_path / "data"
    run = _copy(aws, "s3://corpus-bkt/corpus", str(dest), str(cred))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "2 files, 70005 bytes"
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == ["a.txt", "sub/b.bin"]
    one = _copy(aws, "s3://corpus-bkt/corpus/a.txt", str(tmp_path / "one"), str(cred))  # one object
    assert one.returncode == 0 and (tmp_path / "one/a.txt").read_bytes() == b"hello", one.stderr


@pytest.mark.parametrize("scheme", sorted(TOP))
@pytest.mark.parametrize("os_name", ["ubuntu-22.04", "ubuntu-24.04", "debian-12"])
def test_tool_locks_pin_every_package_to_one_hash(scheme, os_name):
    lines = [ln for ln in (LOCKS / f"{scheme}-{os_name}.txt").read_text().splitlines() if not ln.startswith("#")]
    assert lines and all(LINE.match(ln) for ln in lines), lines
    names = [ln.split("==")[0] for ln in lines]
    assert TOP[scheme] in names and len(names) == len(set(names))
    if scheme == "az":
        assert "azure-identity" in names  # the VM's managed identity
