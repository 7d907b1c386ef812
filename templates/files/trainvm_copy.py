#!/usr/bin/env python3
# trainvm data copier, run by the startup script from /opt/trainvm/datatools/SCHEME (a venv holding
# only that scheme's SDK, installed with --require-hashes from templates/datatools/SCHEME-OS.txt):
#   trainvm_copy.py SRC DEST [CREDENTIAL_FILE]
# Copies every object under SRC (gs://BUCKET/PREFIX, s3://BUCKET/PREFIX, az://ACCOUNT/CONTAINER/PREFIX)
# into DEST, keeping the paths below the prefix; a file already there with the listed size is kept
# (a re-run after an interruption copies the rest). Every object must arrive with its listed size;
# no object at all is an error. Without CREDENTIAL_FILE the VM's own identity reads the source (GCE
# service account, AWS instance profile, Azure managed identity). CREDENTIAL_FILE (mode 0600, fetched
# from the secret store by the VM at run time, never in user data): gs: a service-account JSON key;
# s3: JSON {"aws_access_key_id", "aws_secret_access_key"[, "aws_session_token"]}; az: a SAS token, or
# JSON {"account_key"}. Prints "N files, B bytes".
import json
import os
import sys


def scheme_gs(bucket, prefix, cred):
    from google.cloud import storage

    client = storage.Client.from_service_account_json(cred) if cred else storage.Client()
    for blob in client.list_blobs(bucket, prefix=prefix):
        if not blob.name.endswith("/"):
            yield blob.name, blob.size, blob.download_to_filename


def scheme_s3(bucket, prefix, cred):
    import boto3

    keys = json.load(open(cred)) if cred else {}
    client = boto3.client("s3", **{k: keys[k] for k in ("aws_access_key_id", "aws_secret_access_key", "aws_session_token") if k in keys})
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            if not obj["Key"].endswith("/"):
                yield obj["Key"], obj["Size"], lambda path, key=obj["Key"]: client.download_file(bucket, key, path)


def scheme_az(account, path, cred):
    from azure.storage.blob import ContainerClient

    container, _, prefix = path.partition("/")
    if cred:
        text = open(cred).read().strip()
        credential = {"account_name": account, "account_key": json.loads(text)["account_key"]} if text.startswith("{") else text.lstrip("?")
    else:
        from azure.identity import ManagedIdentityCredential

        credential = ManagedIdentityCredential()
    client = ContainerClient("https://%s.blob.core.windows.net" % account, container, credential=credential)

    def fetch(name, target):
        with open(target, "wb") as fh:
            client.download_blob(name).readinto(fh)

    for blob in client.list_blobs(name_starts_with=prefix):
        yield blob.name, blob.size, lambda target, name=blob.name: fetch(name, target)


def main(argv):
    if len(argv) not in (3, 4):
        print("usage: trainvm_copy.py SRC DEST [CREDENTIAL_FILE]", file=sys.stderr)
        return 2
    src, dest, cred = argv[1], argv[2], argv[3] if len(argv) == 4 and argv[3] else None
    scheme, _, rest = src.partition("://")
    first, _, path = rest.partition("/")
    lister = globals().get("scheme_" + scheme)  # the startup script keeps only the schemes the profile reads
    if lister is None:
        print("trainvm_copy.py: %s:// is not a storage scheme" % scheme, file=sys.stderr)
        return 2
    prefix = path.partition("/")[2] if scheme == "az" else path  # az object names are relative to the container
    try:
        return copy(lister(first, path, cred), src, dest, prefix)
    except Exception as exc:  # an SDK or network error: one line (the script retries), never a traceback
        print("trainvm_copy.py: %s: %s: %s" % (src, type(exc).__name__, exc), file=sys.stderr)
        return 1


def copy(objects, src, dest, prefix):
    count = total = 0
    for key, size, fetch in objects:
        if prefix and key != prefix and not key.startswith(prefix.rstrip("/") + "/"):
            continue  # the listing matches name starts: PREFIX is a folder (or one object), PREFIX-old/ is beside it
        rel = key[len(prefix):].lstrip("/") if key.startswith(prefix) else key
        rel = rel or key.rsplit("/", 1)[-1]
        if rel.startswith("/") or ".." in rel.split("/"):
            print("trainvm_copy.py: refusing object %r (outside %s)" % (key, dest), file=sys.stderr)
            return 1
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not (os.path.isfile(target) and os.path.getsize(target) == size):
            fetch(target + ".trainvm-part")
            os.replace(target + ".trainvm-part", target)
        if os.path.getsize(target) != size:
            print("trainvm_copy.py: %s: %d of %d bytes" % (key, os.path.getsize(target), size), file=sys.stderr)
            return 1
        count, total = count + 1, total + size
    if not count:
        print("trainvm_copy.py: nothing under %s" % src, file=sys.stderr)
        return 1
    print("%d files, %d bytes" % (count, total))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
