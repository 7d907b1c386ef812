"""The fake buckets behind the fake SDKs that the `uv` stub installs into a data-tool venv (boto3,
google-cloud-storage, azure-storage-blob + azure-identity): just enough of each SDK's surface for
templates/files/trainvm_copy.py, over files in $STUB_STATE/buckets/BUCKET (default: two 1024-byte objects
under the prefix, as the old CLI stubs made). Each call is recorded in calls.log as `sdk SCHEME OP ...`.

Knobs: STUB_COPY_FAIL=N (the first N downloads fail, transient), STUB_SDK_SHORT=1 (every download arrives one
byte short), STUB_SDK_EMPTY=1 (the prefix holds nothing), STUB_SDK_FAIL_WITH=TEXT (every download fails with
TEXT in the error message, as an SDK error quoting a request could). Not modelled: paging, auth errors, retries inside the SDK."""
import os

STATE = os.environ["STUB_STATE"]


def record(*args):
    with open(os.path.join(STATE, "calls.log"), "a", encoding="utf-8") as fh:
        fh.write("\t".join(["sdk"] + [str(a) for a in args]) + "\n")


def objects(bucket, prefix):
    if os.environ.get("STUB_SDK_EMPTY"):
        return []
    root = os.path.join(STATE, "buckets", bucket)
    if not os.path.isdir(root):  # two objects in the folder the prefix names (a real listing also matches
        folder = prefix if not prefix or prefix.endswith("/") else prefix + "/"  # name starts: PREFIXpart-0 is beside it)
        return [(folder + "part-00000", 1024), (folder + "part-00001", 1024)]
    out = []
    for d, _, names in os.walk(root):
        for n in names:
            key = os.path.relpath(os.path.join(d, n), root)
            if key.startswith(prefix):
                out.append((key, os.path.getsize(os.path.join(d, n))))
    return sorted(out)


def fetch(bucket, key, path):
    with open(path, "wb") as fh:
        fh.write(content(bucket, key))


def content(bucket, key):
    if os.environ.get("STUB_SDK_FAIL_WITH"):
        raise PermissionError("403 Forbidden: %s" % os.environ["STUB_SDK_FAIL_WITH"])
    counter = os.path.join(STATE, "copy-fails")
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    if n < int(os.environ.get("STUB_COPY_FAIL", "0")):
        with open(counter, "w") as fh:
            fh.write(str(n + 1))
        raise ConnectionError("503 Service Unavailable (stub)")
    src = os.path.join(STATE, "buckets", bucket, key)
    data = open(src, "rb").read() if os.path.exists(src) else b"\0" * 1024
    return data[:-1] if os.environ.get("STUB_SDK_SHORT") else data
