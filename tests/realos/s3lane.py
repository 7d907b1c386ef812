"""The `aws-s3` scenario of `make test-os`: the debian-12 payload rendered for AWS with an ``s3://`` data source,
started from its bootstrap, on a fresh overlay of the same root filesystem (see lane.py, bootlane.py).

Real: the payload is staged by ``S3PayloadStore`` (the provider's own store class) in moto's S3 **server**
(tests/emulators/aws.py) on the host loopback, path-style; the bootstrap's fetch-aws.sh gets an IMDSv2 token and
the instance profile's temporary credentials (issued by moto's STS for a role holding ``role_policy``) from a
loopback IMDSv2 stub and signs the GET with Debian 12's own curl (7.88.1, ``--aws-sigv4``, session-token header
signed); moto's SigV4 and IAM checks are on for everything the VM does. The data phase installs the s3 copy
tool's lock (templates/datatools/s3-debian-12.txt) into /opt/trainvm/datatools/s3 from PyPI with
``uv pip install --require-hashes --only-binary :all:`` on the image's own python3, and
templates/files/trainvm_copy.py copies the prefix with that boto3 from moto, with the same identity: boto3's
default credential chain reads the instance profile's keys from the same IMDSv2 stub.

Modelled (the only lane-side environment): ``TRAINVM_METADATA_URL`` and ``AWS_EC2_METADATA_SERVICE_ENDPOINT``
point the bootstrap and boto3 at the stub instead of 169.254.169.254, ``AWS_ENDPOINT_URL_S3`` points boto3 at moto
instead of s3.amazonaws.com (the payload URL is moto's already); nothing else of boto3's configuration is set (no
region, no keys). Not modelled: the ListBucket ``s3:prefix`` condition of the real policy (moto evaluates no S3
condition keys; ``role_policy`` drops it), bucket policies and Block Public Access, S3's region redirects (moto
answers every region), TLS, credential rotation and IMDS's hop limit, throughput and throttling.

It also starts where the review's R4 starts: the image runs a kernel ABI whose headers the archive has
dropped (``OLD_KERNEL``: uname -r reports it, /lib/modules has it, apt has no headers for it). The payload's script
must install the cloud kernel metapackages and reboot once; the lane "reboots" (/run emptied as tmpfs is,
uname -r reports the newest kernel) and runs what systemd would run at boot, the ExecStart of the
trainvm-provision.service the script installed (the bootstrap's /usr/local/sbin/trainvm-provision), which must
finish to ready. Not modelled: the reboot itself and systemd starting the unit (enabled for real, started by the
lane). The second run is the bootstrap again (user data as a re-run would see it) after the payload object was
deleted: it must fetch nothing, install nothing and copy nothing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
from pathlib import Path

import bootlane
from runner import BASE_ENV, check, final_status, in_root, installed_packages, log, run_script, verify_units

BUCKET = "trainvm-realos"
REGION = "us-east-1"
ROLE = "trainvm-realos-vm"
OLD_KERNEL = "6.1.0-48-cloud-amd64"  # bookworm dropped this ABI: no linux-headers-6.1.0-48-cloud-amd64
PROFILE = """name: realos-deb12-s3
hardware: {{gpu: T4, gpu_count: 1}}
stack:
  os: debian-12
  driver: "{driver}"
  cuda: "12.4"
  python: "{python}"
  packages: [six==1.16.0, nvidia-cuda-runtime-cu12==12.4.127]
data:
  - {{source: "s3://{bucket}/dataset", dest: /mnt/data/ds}}
"""
# objects under the source prefix, and one beside it that a prefix match without "/" would also take
OBJECTS = {"dataset/a.bin": os.urandom(3 << 20), "dataset/sub/b.txt": b"trainvm test-os\n"}
SIBLING = {"dataset-old/c.txt": b"not part of s3://trainvm-realos/dataset\n"}


def render(work: Path, driver: str, python: str, keyring_sha: str):
    """The RenderedScript of the aws-s3 scenario, its script edited (the fake keyring) and packed again (bootlane)."""
    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    path = work / "profile-s3.yaml"
    path.write_text(PROFILE.format(driver=driver, python=python, bucket=BUCKET))
    target = RenderTarget("aws", "g4dn.xlarge", "T4", 1, REGION, "us-east-1a")
    return bootlane.repack(render_script(load_profile(path), target), keyring_sha)


def role_policy(ref) -> dict:
    """The instance profile's policy as ``up`` writes it for this profile (aws_request: the payload object, the data
    prefix), but without the ListBucket ``s3:prefix`` condition: moto evaluates no S3 condition keys (it passes
    only sts:ExternalId to a condition), so there the condition would deny the listing that S3 allows."""
    from types import SimpleNamespace

    from provisioner.providers.aws import request as R

    objects, listing = R._s3_resources((f"s3://{BUCKET}/dataset",))
    statements = [*R.payload_statements(SimpleNamespace(payload=ref)),  # type: ignore[arg-type]  # reads .payload only
                  {"Effect": "Allow", "Action": "s3:GetObject", "Resource": objects},
                  *({k: v for k, v in st.items() if k != "Condition"} for st in listing)]
    return {"Version": "2012-10-17", "Statement": statements}


def instance_profile(aws, policy: dict) -> dict[str, str]:
    """A role with ``policy`` and temporary credentials of it from moto's STS, as IMDS serves them (with the
    Expiration boto3 requires)."""
    import json

    from provisioner.providers.aws.request import ASSUME_ROLE_POLICY

    iam, sts = aws.client("iam", direct=True), aws.client("sts", direct=True)
    arn = iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps(ASSUME_ROLE_POLICY))["Role"]["Arn"]
    iam.put_role_policy(RoleName=ROLE, PolicyName="trainvm", PolicyDocument=json.dumps(policy))
    got = sts.assume_role(RoleArn=arn, RoleSessionName="i-0123456789abcdef0", DurationSeconds=3600)["Credentials"]
    return {"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": got["AccessKeyId"],
            "SecretAccessKey": got["SecretAccessKey"], "Token": got["SessionToken"],
            "Expiration": got["Expiration"].strftime("%Y-%m-%dT%H:%M:%SZ")}


class MotoAuth:
    """moto's SigV4 signature and IAM policy checks (process-global settings; the server is a thread of the lane),
    off while the lane itself (admin keys) stages, tampers with or deletes objects."""

    def __enter__(self) -> MotoAuth:
        self.on()
        return self

    def __exit__(self, *exc: object) -> None:
        self.off()

    @staticmethod
    def on() -> None:
        from moto import settings
        from moto.core.authorization import ActionAuthenticatorMixin

        ActionAuthenticatorMixin.request_count = 0
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0

    @staticmethod
    def off() -> None:
        from moto import settings

        settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")


def lock_pins() -> dict[str, str]:
    from provisioner.render.shell import template_dir

    text = (template_dir() / "datatools/s3-debian-12.txt").read_text(encoding="utf-8")
    return dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+) ", text, re.M))


def scenario(root: Path, work: Path, driver: str, python: str, keyring_sha: str, repo_names: set[str]) -> dict[str, float]:
    """Run it on ``root`` (a fresh overlay with the VM environment); returns the timings."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from provisioner.providers.aws.provider import AwsProvider
    from tests.emulators.aws import MotoAws

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's request lines, not the lane's log
    rendered = render(work, driver, python, keyring_sha)
    sha = rendered.payload.sha256
    auth = MotoAuth()
    with MotoAws(regions=(REGION,)) as aws:
        os.environ["TRAINVM_AWS_ENDPOINT"] = aws.moto_url  # the store's clients (admin keys) on moto, path-style URLs
        ref = AwsProvider().payload_store().stage(REGION, rendered.payload.data, sha)
        s3 = aws.client("s3", direct=True)
        s3.create_bucket(Bucket=BUCKET)
        for key, body in {**OBJECTS, **SIBLING}.items():
            s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        imds = bootlane.serve(bootlane.imdsv2(ROLE, instance_profile(aws, role_policy(ref))))
        try:
            # the bootstrap's fetch and boto3 (the copy tool) both read the instance profile from the IMDSv2 stub;
            # boto3 is pointed at moto instead of s3.amazonaws.com (its only lane-side configuration)
            env = (f"TRAINVM_METADATA_URL={imds.url}", f"AWS_EC2_METADATA_SERVICE_ENDPOINT={imds.url}/",
                   f"AWS_ENDPOINT_URL_S3={aws.moto_url}", *bootlane.FETCH_ENV)
            bootlane.write_user_data(root, rendered.user_data(ref).text)
            log(f"aws-s3: payload {sha[:12]} ({rendered.payload.size} bytes) staged at {ref.url}")
            (root / "lib/modules" / OLD_KERNEL).mkdir(parents=True)
            (root / "var/lib/test-os").mkdir(parents=True)
            (root / "var/lib/test-os/running-kernel").write_text(OLD_KERNEL + "\n")
            s3.put_object(Bucket=ref.store, Key=ref.key, Body=b"not this payload\n" + os.urandom(4096))
            auth.on()
            unsigned = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", ref.url],
                                      capture_output=True, text=True, timeout=60).stdout
            check(unsigned == "403", "aws-s3: moto checks signatures and IAM (an unsigned GET of the payload: 403)", unsigned)
            bootlane.refuses_tampered(root, work, env, sha, "aws-s3")
            auth.off()
            s3.put_object(Bucket=ref.store, Key=ref.key, Body=rendered.payload.data)
            auth.on()
            rc, out, t_boot = run_script(root, bootlane.USER_DATA, env)
            (work / "run0.log").write_text(out)
            log(f"aws-s3 user data (the bootstrap) on kernel {OLD_KERNEL}: rc {rc} in {t_boot:.0f} s")
            bootlane.fetched(root, out, rendered, "aws-s3")
            curl_imds = [p for m, p, ua in imds.seen if ua.startswith("curl/")]
            check("/latest/api/token" in curl_imds and f"/latest/meta-data/iam/security-credentials/{ROLE}" in curl_imds,
                  "aws-s3: fetch-aws.sh signed the GET (curl --aws-sigv4) with the instance profile's IMDSv2 credentials",
                  str(imds.seen))
            stub_log = (root / "var/log/trainvm-stub.log").read_text()
            check(rc == 0 and final_status(out) == "running:driver" and "\nreboot" in "\n" + stub_log
                  and f"linux-headers-{OLD_KERNEL} is not in the archive" in out,
                  f"aws-s3: headers of {OLD_KERNEL} missing from the archive: the cloud kernel installed, one reboot", out)
            unit = (root / "etc/systemd/system/trainvm-provision.service").read_text()
            found = re.search(r"^ExecStart=(\S+)$", unit, re.M)
            check(found is not None, "aws-s3: trainvm-provision.service has an ExecStart", unit)
            exec_start = found.group(1) if found else ""
            check((root / "etc/systemd/system/multi-user.target.wants/trainvm-provision.service").is_symlink()
                  and (root / exec_start.lstrip("/")).read_text() == rendered.startup_sh,
                  f"aws-s3: trainvm-provision.service enabled, {exec_start} the payload's script")
            boot(root)
            rc, out, t_first = run_script(root, exec_start, env)
            (work / "run1.log").write_text(out)
            log(f"aws-s3 after the reboot ({exec_start} as trainvm-provision.service runs it): rc {rc} in {t_first:.0f} s")
            check(rc == 0 and final_status(out) == "ready", "aws-s3: the resumed script reaches ready", out)
            dest = root / "mnt/data/ds"
            got = {str(p.relative_to(dest)): hashlib.sha256(p.read_bytes()).hexdigest() for p in dest.rglob("*") if p.is_file()}
            want = {k.removeprefix("dataset/"): hashlib.sha256(v).hexdigest() for k, v in OBJECTS.items()}
            check(got == want, "aws-s3: every object under the prefix arrived byte-exact, nothing from beside it",
                  f"got {sorted(got)}, want {sorted(want)}")
            boto_imds = [p for m, p, ua in imds.seen if "Botocore" in ua or "Boto3" in ua]
            check("/latest/api/token" in boto_imds and f"/latest/meta-data/iam/security-credentials/{ROLE}" in boto_imds,
                  "aws-s3: boto3 read the instance profile's keys through IMDSv2 (the VM's identity, signed and checked)",
                  str(imds.seen))
            venv = "/opt/trainvm/datatools/s3/bin/python"
            freeze = in_root(root, venv, "-c", "import importlib.metadata as m\n"
                             "for d in m.distributions(): print(d.metadata['Name'].lower().replace('_', '-'), d.version)")
            have = dict(line.split() for line in freeze.splitlines() if line.strip())
            check(have == lock_pins(), "aws-s3: the copy tool's venv holds exactly the lock's pins", f"{have} != {lock_pins()}")
            sysver = in_root(root, venv, "-c", "import sys; print(sys.base_prefix)").strip()
            check(sysver == "/usr", "aws-s3: the copy tool runs on the image's own python3 (base prefix /usr)", sysver)
            verify_units(root)  # trainvm-provision.service (the AWS resume unit) among them
            bootlane.compare_reports(root, out, BASE_ENV, work / "profile-s3.yaml", "aws-s3")
            auth.off()
            s3.delete_object(Bucket=ref.store, Key=ref.key)  # the store emptied: the verified copy is enough
            auth.on()
            rc2, out2, t_second = bootlane.rerun(root, work, env, rendered, "run2")
            check(rc2 == 0 and final_status(out2) == "ready" and "copy tool" not in out2
                  and "data /mnt/data/ds: staged" in out2,
                  f"aws-s3: the bootstrap again, store emptied: nothing fetched, installed or copied, ready ({t_second:.0f} s)", out2)
            driver_pkgs = [n for n, v in installed_packages(root).items() if n in repo_names and v != f"{driver}-1"]
            check(not driver_pkgs, "aws-s3: no driver package off the pinned version", str(driver_pkgs))
        finally:
            auth.off()
            imds.shutdown()
            os.environ.pop("TRAINVM_AWS_ENDPOINT", None)
    return {"first": t_boot + t_first, "second": t_second}


def boot(root: Path) -> None:
    """What a reboot changes that the lane can model: /run is a fresh tmpfs, the newest kernel runs."""
    (root / "var/lib/test-os/running-kernel").unlink()
    for p in (root / "run").glob("reboot-required*"):
        p.unlink()
