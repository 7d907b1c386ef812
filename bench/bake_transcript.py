"""Issue #28's closing note: the bake transcript against the emulators. For each cloud (gcp through the GCE
emulator, aws through moto's server behind its fault proxy, azure through the ARM emulator; payloads staged in the
GCS emulator, moto's S3, Azurite), the real CLI in-process (provisioner.cli.main, as the tests' ``cli`` fixture runs
it) through the real SDKs:

    plan PROFILE --cloud C            no bake yet: says why
    bake PROFILE --cloud C            the builder's console is EMULATED (a successful install log is planted, as
                                      tests/bake/ do: no emulator runs a startup script)
    images --cloud C
    images --profile PROFILE
    plan PROFILE --cloud C            now names the baked image, its storage cost and the time to ready
    up PROFILE --cloud C --yes        boots the baked image: the created instance's boot image, and whether the
                                      payload it was given is the one rendered in baked mode
    down NAME --yes --cloud C
    images delete NAME --cloud C
    what is left in the emulator      must be nothing billable

Each command's exit code, output (long outputs trimmed) and the API calls it made (counted by method from the
emulators' request logs: GCE method ids, EC2/SSM/IAM/S3 actions through moto's proxy, ARM method + resource type;
the GCS emulator and Azurite keep no request log, so payload uploads are not counted on GCP and Azure).

    .venv/bin/python bench/bake_transcript.py [gcp] [aws] [azure] [--full]

Run by hand (not in the test suite); needs the dev extras (moto[server], gcp-storage-emulator) and `npm ci`
(Azurite). Figures: bench/RESULTS.md ("#28 bake transcript").
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CLOUDS = ("gcp", "aws", "azure")
HEAD, TAIL = 28, 6  # lines of a long output that are kept


def trim(text: str, full: bool = False) -> str:
    """``text`` without trailing blank lines; past HEAD + TAIL lines, its first HEAD and last TAIL lines."""
    lines = text.rstrip().splitlines()
    if full or len(lines) <= HEAD + TAIL:
        return "\n".join(lines)
    return "\n".join([*lines[:HEAD], f"    [... {len(lines) - HEAD - TAIL} lines trimmed ...]", *lines[-TAIL:]])


def arm_op(method: str, path: str) -> str:
    """An ARM request as ``METHOD type/chain`` without names: ``PUT virtualMachines``,
    ``POST virtualMachines/deallocate``, ``GET galleries/images/versions``, ``DELETE resourceGroups``."""
    parts = [p for p in path.split("?")[0].strip("/").split("/") if p]
    low = [p.lower() for p in parts]
    if "providers" in low:
        rest = parts[low.index("providers") + 2:]  # after the namespace: type, name, type, name, ..., [action]
        kinds = rest[0::2]
        return f"{method} {'/'.join(kinds)}"
    if "resourcegroups" in low:
        return f"{method} resourceGroups"
    return f"{method} {'/'.join(parts[2:3] or parts[:1])}"


def calls_text(counts: Counter[str]) -> str:
    if not counts:
        return "(no API calls)"
    return f"{sum(counts.values())} calls: " + ", ".join(f"{k} x{n}" for k, n in sorted(counts.items()))


# ---------------------------------------------------------------------------------------------- the CLI in-process

@dataclass
class Result:
    code: int
    out: str
    err: str


def run_cli(*args: str) -> Result:
    """``trainvm ARGS`` through the real entry point (the error funnel included), as tests/conftest.py's ``cli``."""
    from provisioner.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["trainvm", *args]
    os.environ.pop("TRAINVM_DEBUG", None)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved
    return Result(code, out.getvalue(), err.getvalue())


def offline_process() -> None:
    """What tests/conftest.py's pytest_configure does for the suite: no real cloud credentials or config, no PyPI or
    NVIDIA index lookups during `plan`/`up`, and a throwaway cache."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        del os.environ[key]
    os.environ.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                      AWS_EC2_METADATA_DISABLED="true", TRAINVM_CAPTURE_LOCK="0", TRAINVM_DRIVER_INDEX_URL="none",
                      TRAINVM_LOCK_IMAGES="0")


# ---------------------------------------------------------------------------------------------- per cloud

@dataclass
class Cloud:
    """One cloud's emulator as the transcript needs it."""
    name: str
    profile: Path
    n_requests: Callable[[], int]
    counts: Callable[[int], Counter[str]]  # methods of the requests since index n
    plant: Callable[[str], None]  # the builder's console shows a successful bake
    created: Callable[[str], dict[str, Any]]  # after `up`: {name, region, instance_type, boot, user_data}
    left: Callable[[], dict[str, list[str]]]  # what the emulator holds now
    extra: dict[str, Any] = field(default_factory=dict)


def _env(mp: Any, tmp: Path) -> None:
    """tests/e2e/conftest.py's ``env`` fixture (a fixture cannot be called outside pytest)."""
    from tests.e2e.conftest import SSH_KEY
    from tests.helpers import payload_stores

    mp.setenv("TRAINVM_TODAY", "2026-11-22")
    mp.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    mp.setenv("TRAINVM_READY_POLL_SECONDS", "0")
    for var in ("TRAINVM_GCE_ENDPOINT", "GOOGLE_CLOUD_PROJECT", "AZURE_SUBSCRIPTION_ID", "TRAINVM_AZURE_ENDPOINT",
                "TRAINVM_AZURE_ACCESS_TOKEN"):
        mp.delenv(var, raising=False)
    key = tmp / "id.pub"
    key.write_text(SSH_KEY + "\n")
    mp.setenv("TRAINVM_SSH_PUBLIC_KEY", str(key))
    payload_stores(mp)


def _builder(profile: Path) -> str:
    from provisioner.bake.run import builder_name
    from provisioner.profile import load_profile
    from provisioner.providers.base import vm_name

    loaded = load_profile(profile)
    return builder_name(vm_name(loaded.profile.name, loaded.hash))


def _console_text() -> str:
    from tests.bake.test_bake_aws import _console

    return _console("preflight", "driver", "python", "packages", "bake-clean")


@contextlib.contextmanager
def gcp(mp: Any, tmp: Path) -> Iterator[Cloud]:
    """tests/bake/test_up_baked_gce.py's ``gce`` and ``tf`` fixtures: the GCE emulator (gce_cli_env) and a copy of
    profiles/ (tf-resnet50 has a committed lock)."""
    from tests.bake.test_bake_gce import _console
    from tests.bake.test_up_baked_gce import _boot_image
    from tests.helpers import gce_cli_env

    mp.setenv("TRAINVM_GCE_OP_TIMEOUT", "5")
    shutil.copytree(REPO / "profiles", tmp / "profiles")
    profile = tmp / "profiles" / "examples" / "tf-resnet50.yaml"
    gen = gce_cli_env(mp, tmp)
    gce = next(gen)
    builder = _builder(profile)

    def counts(n: int) -> Counter[str]:
        return Counter((r.method_id or f"{r.method} {r.path}").removeprefix("compute.") for r in gce.requests[n:])

    def created(name: str) -> dict[str, Any]:
        inst = gce.instance(name)
        zone = inst["zone"].rsplit("/", 1)[-1]
        return {"name": name, "zone": zone, "instance_type": inst["machineType"].rsplit("/", 1)[-1],
                "boot": _boot_image(gce), "payload_label": inst["labels"].get("trainvm-payload", ""),
                "baked_label": inst["labels"].get("trainvm-baked")}

    def left() -> dict[str, list[str]]:
        return {"instances (with their disks)": [k[2] for k in gce.instances],
                "images": [k[1] for k in gce.baked],
                "firewall rules (not billed)": [k[1] for k in gce.firewalls],
                "GCS objects (the payload store)": _gcs_objects(os.environ["TRAINVM_GCS_ENDPOINT"])}

    try:
        yield Cloud("gcp", profile, lambda: len(gce.requests), counts,
                    lambda name: gce.play_serial(name, _console("preflight", "driver", "python", "packages",
                                                                "bake-clean")),
                    created, left, {"emu": gce, "builder": builder})
    finally:
        gen.close()


@contextlib.contextmanager
def aws(mp: Any, tmp: Path) -> Iterator[Cloud]:
    """tests/e2e/conftest.py's ``aws`` fixture and tests/bake/test_bake_aws.py's ``profile`` and ``plant``."""
    from tests.e2e.conftest import ssh_key
    from tests.emulators.aws import shared_moto

    _env(mp, tmp)
    emu = shared_moto()
    emu.reset()
    for k, v in emu.env().items():
        mp.setenv(k, v)
    mp.setenv("TRAINVM_AWS_OP_TIMEOUT", "5")
    mp.setenv("TRAINVM_SSH_PUBLIC_KEY", str(ssh_key(tmp)))
    shutil.copy(REPO / "profiles" / "examples" / "tf-resnet50.lock", tmp / "tf-resnet50.lock")
    profile = tmp / "tf-resnet50.yaml"
    profile.write_text(f"extends: {REPO / 'profiles' / 'examples' / 'tf-resnet50.yaml'}\nplacement:\n  clouds: [aws]\n"
                       "data:\n  - {source: 'https://example.com/imagenet.tar', dest: /mnt/data/imagenet}\n")
    regions = (*emu.regions, "us-east-2")
    before = _aws_ids(emu, regions)  # the seeded public AMIs
    stop = threading.Event()

    def plant(name: str) -> None:
        def watch() -> None:
            while not stop.is_set():
                for region in emu.regions:
                    for inst in emu.instances(region):
                        if {t["Key"]: t["Value"] for t in inst.get("Tags") or []}.get("Name") == name:
                            emu.faults.set_console(inst["InstanceId"], _console_text())
                            return
                time.sleep(0.02)
        threading.Thread(target=watch, daemon=True).start()

    def counts(n: int) -> Counter[str]:
        return Counter(r.action or "(no Action form parameter: a JSON-protocol call)" for r in emu.faults.requests[n:])

    def created(name: str) -> dict[str, Any]:
        for region in emu.regions:
            for inst in emu.instances(region):
                if {t["Key"]: t["Value"] for t in inst.get("Tags") or []}.get("Name") == name:
                    attr = emu.client("ec2", region, direct=True).describe_instance_attribute(
                        InstanceId=inst["InstanceId"], Attribute="userData")
                    user_data = base64.b64decode(attr.get("UserData", {}).get("Value", "") or b"").decode(errors="replace")
                    return {"name": name, "region": region, "instance_type": inst["InstanceType"],
                            "boot": inst["ImageId"], "user_data": user_data}
        raise LookupError(name)

    def left() -> dict[str, list[str]]:
        got: dict[str, list[str]] = {"instances": [], "volumes": [], "AMIs": [], "snapshots": []}
        for region in regions:
            ec2 = emu.client("ec2", region, direct=True)
            got["instances"] += [f"{region}:{i['InstanceId']}" for i in emu.instances(region)]
            got["volumes"] += [f"{region}:{v['VolumeId']}" for v in ec2.describe_volumes()["Volumes"]]
            got["AMIs"] += [f"{region}:{i['ImageId']}" for i in ec2.describe_images(Owners=["self"])["Images"]
                            if i["ImageId"] not in before]
            got["snapshots"] += [f"{region}:{s['SnapshotId']}" for s in
                                 ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"] if s["SnapshotId"] not in before]
        got["security groups"] = [g["GroupName"] for g in emu.security_groups()]
        got["instance profiles"] = emu.instance_profiles()
        s3 = emu.client("s3", direct=True)
        got["S3 objects (the payload store)"] = [f"{b['Name']}/{o['Key']}" for b in s3.list_buckets()["Buckets"]
                                                 for o in s3.list_objects_v2(Bucket=b["Name"]).get("Contents", [])]
        return got

    try:
        yield Cloud("aws", profile, lambda: len(emu.faults.requests), counts, plant, created, left, {"emu": emu})
    finally:
        stop.set()


def _gcs_objects(url: str) -> list[str]:
    """Every object of every bucket the GCS emulator holds (its JSON API; project e2e-proj, as gce_cli_env sets)."""
    import json
    import urllib.request

    def get(path: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"{url}/storage/v1/{path}", timeout=10) as r:
            doc: dict[str, Any] = json.loads(r.read())
            return doc

    return [f"{b['name']}/{o['name']}" for b in get("b?project=e2e-proj").get("items", [])
            for o in get(f"b/{b['name']}/o").get("items", [])]


def _aws_ids(emu: Any, regions: tuple[str, ...]) -> set[str]:
    ids: set[str] = set()
    for region in regions:
        ec2 = emu.client("ec2", region, direct=True)
        ids |= {i["ImageId"] for i in ec2.describe_images(Owners=["self"])["Images"]}
        ids |= {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    return ids


@contextlib.contextmanager
def azure(mp: Any, tmp: Path) -> Iterator[Cloud]:
    """tests/bake/test_bake_azure.py's ``arm``, ``profile`` and ``builder`` fixtures."""
    from tests.emulators.arm import ArmEmulator

    _env(mp, tmp)
    shutil.copytree(REPO / "profiles", tmp / "profiles")
    base = tmp / "profiles" / "examples"
    profile = base / "tf-azure.yaml"
    shutil.copy(base / "tf-resnet50.lock", base / "tf-azure.lock")
    profile.write_text("extends: tf-resnet50.yaml\nhardware: {gpu: T4, min_vcpus: 4, min_memory_gib: 16}\n"
                       "placement:\n  clouds: [azure]\n"
                       "data:\n  - {source: 'https://example.com/imagenet.tar', dest: /mnt/data/imagenet}\n")
    with ArmEmulator() as arm:
        for k, v in arm.env().items():
            mp.setenv(k, v)
        mp.setenv("TRAINVM_AZURE_POLL_SECONDS", "0")

        def counts(n: int) -> Counter[str]:
            return Counter(arm_op(r.method, r.path) for r in arm.requests[n:])

        def created(name: str) -> dict[str, Any]:
            [put] = arm.calls("PUT", f"/virtualMachines/{name}$")
            props = put.body["properties"]
            return {"name": name, "region": put.body["location"], "instance_type": props["hardwareProfile"]["vmSize"],
                    "boot": props["storageProfile"]["imageReference"],
                    "user_data": base64.b64decode(props["osProfile"]["customData"]).decode(errors="replace")}

        def left() -> dict[str, list[str]]:
            kinds: dict[str, list[str]] = {}
            for r in arm.state.res.values():
                kinds.setdefault(r["type"].removeprefix("Microsoft."), []).append(r["id"].rsplit("/", 1)[-1])
            # the blobs in Azurite (the payload store) are not listed: Azurite keeps no log and needs the account key
            return {"resource groups": sorted(arm.resource_groups()), **kinds}

        try:
            yield Cloud("azure", profile, lambda: len(arm.requests), counts,
                        lambda name: arm.set_serial_log(f"trainvm-{name}", name, _console_text()), created, left,
                        {"emu": arm})
        finally:
            arm.finish_operations(stuck=True)


# ---------------------------------------------------------------------------------------------- the transcript

def payload_modes(profile: Path, cloud: str, got: dict[str, Any]) -> dict[str, str]:
    """The payload's sha256 for the offer `up` created, rendered to install and rendered for a baked image."""
    from provisioner.planner.from_profile import Overrides, make_plan
    from provisioner.profile import load_profile
    from provisioner.render.script import render_for_offer

    loaded = load_profile(profile)
    plan = make_plan(loaded, Overrides((cloud,), None, None)).plan
    offer = next(o for o in (plan.chosen, *plan.failover) if o.instance_type == got["instance_type"]
                 and (o.zone == got["zone"] if "zone" in got else o.region == got["region"]))
    return {mode or "install": render_for_offer(loaded, offer, mode).payload.sha256 for mode in ("", "baked")}


def transcript(c: Cloud, full: bool) -> list[str]:
    out: list[str] = []
    rel = c.profile.name

    def step(*args: str) -> Result:
        n = c.n_requests()
        t0 = time.monotonic()
        r = run_cli(*args)
        shown = " ".join(a if a != str(c.profile) else f"PROFILE({rel})" for a in args)
        out.append(f"$ trainvm {shown}")
        out.append(f"  exit {r.code} in {time.monotonic() - t0:.1f} s; API: {calls_text(c.counts(n))}")
        for label, text in (("stdout", r.out), ("stderr", r.err)):
            if text.strip():
                out.append(f"  --- {label}")
                out.extend("  " + line for line in trim(text, full).splitlines())
        out.append("")
        return r

    from provisioner.bake import records

    step("plan", str(c.profile), "--cloud", c.name)
    builder = _builder(c.profile)
    c.plant(builder)
    out.append(f"[the builder {builder}'s console is EMULATED: a successful install log is planted, as tests/bake/ do]")
    step("bake", str(c.profile), "--cloud", c.name)
    step("images", "--cloud", c.name)
    step("images", "--profile", str(c.profile))
    step("plan", str(c.profile), "--cloud", c.name)
    recs = [r for r in records.load() if r.get("cloud") == c.name]
    image = recs[0]["name"] if recs else None
    up = step("up", str(c.profile), "--cloud", c.name, "--yes")
    name = _vm_name(c, up)
    if name:
        got = c.created(name)
        shas = payload_modes(c.profile, c.name, got)
        if "payload_label" in got:  # GCE labels the instance with the staged payload's sha256 (16 hex digits)
            mode = next((m for m, s in shas.items() if s[:16] == got["payload_label"]), "neither")
        else:  # AWS user data / Azure custom data is the bootstrap, which names the payload's sha256
            mode = next((m for m, s in shas.items() if s in got["user_data"]), "neither")
        out.append(f"[created {name} ({got['instance_type']}); its boot image: {got['boot']}]")
        out.append(f"[its payload is the {mode!r}-mode one (install {shas['install'][:16]}, baked {shas['baked'][:16]});"
                   f" the baked image is {image}]")
        out.append("")
        step("down", name, "--yes", "--cloud", c.name)
    else:
        out.append("[up created no VM that the transcript could find]")
    if image:
        step("images", "delete", image, "--cloud", c.name)
    left = c.left()
    out.append("what is left in the emulator:")
    for kind, items in left.items():
        out.append(f"  {kind}: {', '.join(items) if items else 'none'}")
    return out


def _vm_name(c: Cloud, up: Result) -> str | None:
    """The VM `up` created: the name it prints (``trainvm-tf-...``), not the builder's."""
    names = [n for n in re.findall(r"\btrainvm-[a-z0-9-]+\b", up.out + up.err) if "-bake" not in n
             and not n.startswith(("trainvm-gallery", "trainvm-payload"))]
    return names[0] if names else None


def main(argv: list[str]) -> int:
    import pytest

    full = "--full" in argv
    clouds = [a for a in argv if a in CLOUDS] or list(CLOUDS)
    offline_process()
    import logging

    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)  # moto's server logs every request on stderr
    fixtures = {"gcp": gcp, "aws": aws, "azure": azure}
    failed = False
    for cloud in clouds:
        with tempfile.TemporaryDirectory(prefix=f"trainvm-bake-{cloud}-") as tmp, pytest.MonkeyPatch.context() as mp:
            mp.setenv("XDG_CACHE_HOME", str(Path(tmp) / "cache"))  # the local record of bakes starts empty
            print(f"## {cloud}\n")
            try:
                with fixtures[cloud](mp, Path(tmp)) as c:
                    lines = transcript(c, full)
            except Exception as exc:  # a bench: say what broke and go on with the next cloud
                failed = True
                lines = [f"[the transcript of {cloud} stopped: {type(exc).__name__}: {exc}]"]
            print("\n".join(lines) + "\n", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    rc = main(sys.argv[1:])
    sys.stdout.flush()
    # not sys.exit: the emulators' server threads are not daemons (the shared GCS emulator's API thread, the ARM
    # emulator's keep-alive request threads) and the interpreter would wait for them forever
    os._exit(rc)
