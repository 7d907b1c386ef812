"""User data and payload sizes per bundled profile and cloud (the table in bench/RESULTS.md).

    .venv/bin/python bench/user_data_sizes.py

User data is the bootstrap (render/bootstrap.py) on every cloud; the aim is <= 4,096 bytes gzipped and a size
that does not grow with the profile. For each bundled profile and cloud: the bootstrap raw and gzipped, and the
payload (render/payload.py) it fetches, for the profile as it is, with its data on the cloud's own store
(``native data``: the copy tool, its lock and the copier in the payload), locked (a 400-line hash-pinned lock: what
`trainvm lock` writes for a torch + transformers stack is 150-400 lines), as a container stack, and with ``perf:``.
The store URL is the preview one (the account part a placeholder of about the real length: ``PROJECT``/``ACCOUNT``
stand for a 6-30 character project id and a 12-digit account id), so a real URL differs by a few bytes."""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "render"))

import support as S  # noqa: E402

from provisioner.profile.loader import profile_hash  # noqa: E402
from provisioner.providers.registry import cloud  # noqa: E402

AIM = 4096


def _locked(lp, tmp: Path):
    lock = tmp / f"{lp.profile.name}.lock.txt"
    pins = [p for p in lp.profile.stack.packages]
    body = "".join(f"{p} \\\n    --hash=sha256:{hashlib.sha256(p.encode()).hexdigest()}\n" for p in pins)
    body += "".join(f"dep{i:04d}==1.{i}.0 \\\n    --hash=sha256:{hashlib.sha256(str(i).encode()).hexdigest()}\n" for i in range(400))
    lock.write_text(body)
    return dataclasses.replace(lp, requirements_path=lock)


def _perf(lp):
    from provisioner.profile.model import PerfProbe

    prof = lp.profile.model_copy(update={"perf": lp.profile.perf or PerfProbe()})
    return dataclasses.replace(lp, profile=prof, hash=profile_hash(prof))


def variants(path: Path, cloud_name: str, tmp: Path):
    lp = S.loaded(path)
    yield "as is", lp
    yield "native data", S.data_native_to(lp, cloud_name)
    yield "locked", _locked(lp, tmp)
    yield "perf", _perf(lp)
    yield "container", S.from_dict(S.container_profile(lp.profile.stack.os))


def main() -> int:
    import tempfile

    profiles = S.EXAMPLES + sorted((REPO / "profiles/base").glob("*.yaml"))
    worst = 0
    print(f"{'profile':<24} {'variant':<12} {'cloud':<6} {'user data':>9} {'gzip':>6} {'limit':>7} {'payload':>9} {'script':>8}")
    with tempfile.TemporaryDirectory() as d:
        for path in profiles:
            for cloud_name in S.CLOUDS:
                for label, lp in variants(path, cloud_name, Path(d)):
                    try:
                        rendered = S.render(lp, cloud_name)
                    except Exception as exc:  # noqa: BLE001 - a variant the profile cannot take (shown, not hidden)
                        print(f"{path.stem:<24} {label:<12} {cloud_name:<6} {'-':>9} ({type(exc).__name__}: {str(exc)[:60]})")
                        continue
                    boot = rendered.preview()
                    worst = max(worst, boot.gzip_size)
                    print(f"{path.stem:<24} {label:<12} {cloud_name:<6} {boot.size:>9,} {boot.gzip_size:>6,} "
                          f"{cloud(cloud_name).user_data.limit:>7,} {rendered.payload.size:>9,} {len(rendered.startup_sh.encode()):>8,}")
    print(f"\nlargest bootstrap: {worst:,} bytes gzipped (aim {AIM:,}): {'OK' if worst <= AIM else 'OVER'}")
    signed_url_sizes()
    return 0 if worst <= AIM else 1


def signed_url_sizes() -> None:
    """AWS on Ubuntu 22.04 also carries a URL presigned by boto3 (fetch-aws.sh: its curl cannot sign the session
    token header): the bootstrap with such a URL, made offline by botocore with long-term keys and with temporary
    ones (a 1,024-character session token, the order of an SSO/STS token), for the real bucket and key lengths."""
    import base64
    import hashlib
    import os

    import boto3
    from botocore.config import Config

    from provisioner.providers.store import PayloadRef, payload_key
    from provisioner.render.bootstrap import render_bootstrap

    sha = hashlib.sha256(b"payload").hexdigest()  # random-looking values: they do not compress, as real ones do not
    token = base64.b64encode(os.urandom(768)).decode()
    for label, tok in (("long-term keys", None), ("temporary keys", token)):
        s3 = boto3.client("s3", region_name="us-east-1", aws_access_key_id="AKIA" + os.urandom(8).hex().upper(),
                          aws_secret_access_key=base64.b64encode(os.urandom(30)).decode(),
                          aws_session_token=tok, config=Config(signature_version="s3v4"))
        bucket = "trainvm-123456789012-us-east-1"
        url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": payload_key(sha)}, ExpiresIn=21600)
        ref = PayloadRef(cloud="aws", region="us-east-1", store=bucket, key=payload_key(sha), sha256=sha, size=1,
                         url=f"https://{bucket}.s3.us-east-1.amazonaws.com/{payload_key(sha)}", signed_url=url)
        boot = render_bootstrap(ref, "f" * 64, "ubuntu-22.04")
        print(f"aws ubuntu-22.04 with a presigned URL ({label}): {boot.size:,} bytes, {boot.gzip_size:,} gzipped "
              f"(limit {cloud('aws').user_data.limit:,} raw)")


if __name__ == "__main__":
    sys.exit(main())
