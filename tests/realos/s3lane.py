"""The `aws-s3` scenario of `make test-os`: the debian-12 script rendered for AWS (the compacted form AWS
runs) with an ``s3://`` data source, on a fresh overlay of the same root filesystem (see lane.py).

Real: the data phase installs the s3 copy tool's lock (templates/datatools/s3-debian-12.txt) into
/opt/trainvm/datatools/s3 from PyPI with ``uv pip install --require-hashes --only-binary :all:`` on the
image's own python3, and templates/files/trainvm_copy.py copies the prefix with that boto3 from moto's S3
**server** (tests/emulators/aws.py) on the host loopback, with the VM's identity: boto3's default credential
chain reads the instance profile's keys from IMDSv2 (moto's instance-metadata endpoint on the same server).

Modelled (the only lane-side environment): ``AWS_ENDPOINT_URL_S3`` and ``AWS_EC2_METADATA_SERVICE_ENDPOINT``
point boto3 at moto instead of s3.amazonaws.com and 169.254.169.254; nothing else of boto3's configuration
is set (no region, no keys). Not modelled: bucket policies and the instance profile's IAM policy (moto does
not enforce them), S3's region redirects (moto answers every region), throughput and throttling.

It also starts where the review's R4 starts: the image runs a kernel ABI whose headers the archive has
dropped (``OLD_KERNEL``: uname -r reports it, /lib/modules has it, apt has no headers for it). The script
must install the cloud kernel metapackages and reboot once; the lane "reboots" (/run emptied as tmpfs is,
uname -r reports the newest kernel) and runs what systemd would run at boot, the ExecStart of the
trainvm-provision.service the script installed (its self-copy), which must finish to ready. Not
modelled: the reboot itself and systemd starting the unit (enabled for real, started by the lane).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path

from runner import check, final_status, in_root, installed_packages, log, run_script, verify_units

BUCKET = "trainvm-realos"
OLD_KERNEL = "6.1.0-48-cloud-amd64"  # bookworm dropped this ABI: no linux-headers-6.1.0-48-cloud-amd64
PROFILE = """name: realos-deb12-s3
hardware: {{gpu: T4, gpu_count: 1}}
stack:
  os: debian-12
  driver: "{driver}"
  cuda: "12.4"
  python: "{python}"
  packages: [six==1.16.0]
data:
  - {{source: "s3://{bucket}/dataset", dest: /mnt/data/ds}}
"""
# objects under the source prefix, and one beside it that a prefix match without "/" would also take
OBJECTS = {"dataset/a.bin": os.urandom(3 << 20), "dataset/sub/b.txt": b"trainvm test-os\n"}
SIBLING = {"dataset-old/c.txt": b"not part of s3://trainvm-realos/dataset\n"}


def render(work: Path, driver: str, python: str, keyring_sha: str) -> str:
    from provisioner.profile import load_profile
    from provisioner.render import RenderTarget, render_script

    path = work / "profile-s3.yaml"
    path.write_text(PROFILE.format(driver=driver, python=python, bucket=BUCKET))
    target = RenderTarget("aws", "g4dn.xlarge", "T4", 1, "us-east-1", "us-east-1a")
    # script_url: where AWS user data would be a bootstrap (the script past 16 KB gzipped); the lane runs
    # the script itself, so the bootstrap is never used. spill=False: no instance carries tags here (there is no
    # IMDS at 169.254.169.254 in the lane), so the embedded files stay in the script (render/spill.py)
    script = render_script(load_profile(path), target, script_url="https://trainvm-realos.invalid/startup.sh",
                           spill=False).startup_sh
    script, n = re.subn(r"^TV_KEYRING_SHA256=\S+$", f"TV_KEYRING_SHA256={keyring_sha}", script, flags=re.M)
    assert n == 1, "TV_KEYRING_SHA256 is not one line of the rendered script"
    return script


def lock_pins() -> dict[str, str]:
    from provisioner.render.shell import template_dir

    text = (template_dir() / "datatools/s3-debian-12.txt").read_text(encoding="utf-8")
    return dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+) ", text, re.M))


class _Requests(logging.Handler):
    """The request lines moto's server logs (werkzeug), kept instead of printed."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def scenario(root: Path, work: Path, driver: str, python: str, keyring_sha: str, repo_names: set[str]) -> dict[str, float]:
    """Run it on ``root`` (a fresh overlay with the VM environment); returns the timings."""
    import sys

    requests = _Requests()
    werkzeug = logging.getLogger("werkzeug")
    werkzeug.addHandler(requests)
    werkzeug.propagate = False

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.emulators.aws import MotoAws

    with MotoAws(regions=("us-east-1",)) as aws:
        s3 = aws.client("s3", direct=True)
        s3.create_bucket(Bucket=BUCKET)
        for key, body in {**OBJECTS, **SIBLING}.items():
            s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        env = (f"AWS_ENDPOINT_URL_S3={aws.moto_url}", f"AWS_EC2_METADATA_SERVICE_ENDPOINT={aws.moto_url}/")
        (root / "root/startup-script").write_text(render(work, driver, python, keyring_sha))
        (root / "lib/modules" / OLD_KERNEL).mkdir(parents=True)
        (root / "var/lib/test-os").mkdir(parents=True)
        (root / "var/lib/test-os/running-kernel").write_text(OLD_KERNEL + "\n")
        rc, out, t_boot = run_script(root, "startup-script", env)
        (work / "run0.log").write_text(out)
        log(f"aws-s3 user data on kernel {OLD_KERNEL}: rc {rc} in {t_boot:.0f} s")
        stub_log = (root / "var/log/trainvm-stub.log").read_text()
        check(rc == 0 and final_status(out) == "running:driver" and "\nreboot" in "\n" + stub_log
              and f"linux-headers-{OLD_KERNEL} is not in the archive" in out,
              f"aws-s3: headers of {OLD_KERNEL} missing from the archive: the cloud kernel installed, one reboot", out)
        unit = (root / "etc/systemd/system/trainvm-provision.service").read_text()
        exec_start = re.search(r"^ExecStart=(\S+)$", unit, re.M).group(1)
        check((root / "etc/systemd/system/multi-user.target.wants/trainvm-provision.service").is_symlink()
              and (root / exec_start.lstrip("/")).is_file(), f"aws-s3: trainvm-provision.service enabled, {exec_start} there")
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
        imds = [r for r in requests.lines if "/latest/" in r]
        check(any("/latest/api/token" in r for r in imds) and any("security-credentials/" in r for r in imds),
              "aws-s3: boto3 read the instance profile's keys through IMDSv2 (the VM's identity)", "\n".join(requests.lines))
        venv = "/opt/trainvm/datatools/s3/bin/python"
        freeze = in_root(root, venv, "-c", "import importlib.metadata as m\n"
                         "for d in m.distributions(): print(d.metadata['Name'].lower().replace('_', '-'), d.version)")
        have = dict(line.split() for line in freeze.splitlines() if line.strip())
        check(have == lock_pins(), "aws-s3: the copy tool's venv holds exactly the lock's pins", f"{have} != {lock_pins()}")
        sysver = in_root(root, venv, "-c", "import sys; print(sys.base_prefix)").strip()
        check(sysver == "/usr", "aws-s3: the copy tool runs on the image's own python3 (base prefix /usr)", sysver)
        verify_units(root)  # trainvm-provision.service (the AWS resume unit) among them
        dpkg_log = root / "var/log/dpkg.log"
        before = dpkg_log.stat().st_size
        rc2, out2, t_second = run_script(root, exec_start, env)
        (work / "run2.log").write_text(out2)
        check(rc2 == 0 and final_status(out2) == "ready" and dpkg_log.stat().st_size == before
              and "copy tool" not in out2 and "data /mnt/data/ds: staged" in out2,
              f"aws-s3: a second run installs nothing, copies nothing and exits 0 ({t_second:.0f} s)", out2)
        driver_pkgs = [n for n, v in installed_packages(root).items() if n in repo_names and v != f"{driver}-1"]
        check(not driver_pkgs, "aws-s3: no driver package off the pinned version", str(driver_pkgs))
    return {"first": t_boot + t_first, "second": t_second}


def boot(root: Path) -> None:
    """What a reboot changes that the lane can model: /run is a fresh tmpfs, the newest kernel runs."""
    (root / "var/lib/test-os/running-kernel").unlink()
    for p in (root / "run").glob("reboot-required*"):
        p.unlink()
