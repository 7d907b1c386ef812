"""``trainvm bake --cloud aws`` and ``trainvm images`` through the CLI, boto3 and moto's server (behind the fault proxy
of tests/emulators/aws_faults.py): the builder is a real RunInstances, StopInstances and TerminateInstances; the image
a real CreateImage / CopyImage / DescribeImages / DeregisterImage / DeleteSnapshot. The builder's startup script does
not run: its console output is planted once the builder exists (``set_console``), as the AWS ``up`` tests do.

What moto does not model (so these tests cannot show it): an AMI is ``available`` at once (no ``pending``; the wait is
exercised but never waits); ``NoReboot`` is ignored; CreateImage refuses a ``snapshot`` TagSpecification
(NotImplementedError: trainvm tags snapshots with CreateTags, which moto does model); CopyImage ignores
``TagSpecifications``/``CopyImageTags`` and copies no tags (as EC2 does by default); every AMI's snapshot is a 15 GiB
placeholder whatever the builder's volume; snapshot storage is not billed."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from provisioner.bake.run import builder_name
from provisioner.catalog.storage import EMBEDDED_DIR, load_catalog
from provisioner.profile import load_profile
from provisioner.providers.base import vm_name
from provisioner.providers.image_identity import LABEL_KIND, LABEL_LOCK_A, LABEL_LOCK_B, LABEL_STACK, mismatch
from tests.helpers import REPO, sigterm_when

LOG = "2026-11-27T10:00:0{i}+0000 trainvm {phase}: {msg}\n"
REGIONS = ("us-east-1", "us-west-2")  # the emulator's regions (TRAINVM_AWS_REGIONS)


def _console(*phases: str, end: str = "baked") -> str:
    text = ""
    for i, phase in enumerate(phases):
        text += LOG.format(i=i, phase=phase, msg="phase start") + f"TRAINVM_STATUS=running:{phase}\n"
        text += LOG.format(i=i, phase=phase, msg="phase end: done")
    return text + f"TRAINVM_STATUS={end}\n"


@pytest.fixture
def profile(tmp_path) -> Path:
    """tf-resnet50 (its committed lock: the lock's inputs do not include placement or data) placed on AWS only,
    reading its data over https (a gs:// source needs a credential on AWS)."""
    shutil.copy(REPO / "profiles" / "examples" / "tf-resnet50.lock", tmp_path / "tf-resnet50.lock")
    path = tmp_path / "tf-resnet50.yaml"
    path.write_text(f"extends: {REPO / 'profiles' / 'examples' / 'tf-resnet50.yaml'}\nplacement:\n  clouds: [aws]\n"
                    "data:\n  - {source: 'https://example.com/imagenet.tar', dest: /mnt/data/imagenet}\n")
    loaded = load_profile(path)
    assert loaded.lock_state == "fresh"
    return path


@pytest.fixture
def builder(profile) -> str:
    loaded = load_profile(profile)
    return builder_name(vm_name(loaded.profile.name, loaded.hash))


@pytest.fixture
def plant(aws):
    """``plant(name, text)``: once an instance called ``name`` exists, its console shows ``text``."""
    stop = threading.Event()
    threads = []

    def watch(name: str, text: str) -> None:
        while not stop.is_set():
            for region in REGIONS:
                for inst in aws.instances(region):
                    if {t["Key"]: t["Value"] for t in inst.get("Tags") or []}.get("Name") == name:
                        aws.faults.set_console(inst["InstanceId"], text)
                        return
            time.sleep(0.02)

    def start(name: str, text: str) -> None:
        t = threading.Thread(target=watch, args=(name, text), daemon=True)
        t.start()
        threads.append(t)

    yield start
    stop.set()
    for t in threads:
        t.join(5)


ALL_REGIONS = (*REGIONS, "us-east-2")


BEFORE: set[str] = set()  # the AMIs and snapshots moto holds before a test (its public catalog, the seeded AMIs)


def _ids(aws) -> set[str]:
    ids: set[str] = set()
    for region in ALL_REGIONS:
        ec2 = aws.client("ec2", region, direct=True)
        ids |= {i["ImageId"] for i in ec2.describe_images(Owners=["self"])["Images"]}
        ids |= {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    return ids


@pytest.fixture(autouse=True)
def before(aws) -> None:
    BEFORE.clear()
    BEFORE.update(_ids(aws))


def _amis(aws, region: str) -> list[dict]:
    got = aws.client("ec2", region, direct=True).describe_images(Owners=["self"])["Images"]
    return [i for i in got if i["ImageId"] not in BEFORE]


def _snapshots(aws, region: str) -> list[dict]:
    got = aws.client("ec2", region, direct=True).describe_snapshots(OwnerIds=["self"])["Snapshots"]
    return [s for s in got if s["SnapshotId"] not in BEFORE]


def _volumes(aws, region: str) -> list[dict]:
    return aws.client("ec2", region, direct=True).describe_volumes()["Volumes"]


def _tags(thing: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in thing.get("Tags") or []}


def _nothing_left(aws) -> None:
    for region in ALL_REGIONS:
        assert aws.instances(region) == [], region
        assert _amis(aws, region) == [], region
        assert _snapshots(aws, region) == [], region
        assert _volumes(aws, region) == [], region
    assert aws.security_groups() == [] and aws.instance_profiles() == []


def test_bake_makes_a_tagged_ami_copies_it_to_the_failover_regions_and_terminates_the_builder(cli, aws, profile,
                                                                                               builder, plant):
    plant(builder, _console("preflight", "driver", "python", "packages", "bake-clean"))
    r = cli("bake", str(profile), "--cloud", "aws", "--json")
    assert r.code == 0, r.err[-3000:]
    doc = r.json()
    assert doc["baked"] is True and doc["builder"] == builder
    image = doc["image"]
    # the builder: m6i.large, no GPU, in the GPU offer's region; stopped before CreateImage, then terminated
    [run] = aws.faults.calls("RunInstances")
    assert run.params["InstanceType"] == "m6i.large" and run.params["Placement.AvailabilityZone"].startswith("us-east-1")
    order = [c.action for c in aws.faults.requests if c.action in ("StopInstances", "CreateImage", "CopyImage",
                                                                    "TerminateInstances")]
    assert order == ["StopInstances", "CreateImage", "CopyImage", "TerminateInstances"]
    [create] = aws.faults.calls("CreateImage")
    assert create.params["NoReboot"] == "false"
    assert aws.instances("us-east-1") == []
    assert _volumes(aws, "us-east-1") == []  # the builder's root volume went with it
    # one AMI per region: the builder's and the failover's other emulated region (us-east-2 is in the failover
    # order but not among the regions trainvm lists, so no copy goes where `trainvm images` would never see it)
    assert image["status"] == "available" and image["regions"] == list(REGIONS)
    assert _amis(aws, "us-east-2") == []
    from provisioner.bake.run import plan_bake
    from provisioner.hooks.providers import get_provider
    from provisioner.providers.aws.bake import AwsBaker

    want = plan_bake(load_profile(profile), AwsBaker(get_provider("aws")), "aws", None).identity
    assert want.base_image.startswith("ubuntu/images/")  # the AMI's name: the same in every region
    for region in REGIONS:
        [ami] = _amis(aws, region)
        tags = _tags(ami)
        assert ami["Name"] == image["name"] and tags["Name"] == image["name"]
        assert mismatch(tags, want) is None, region  # the copy is tagged too: CopyImage copies no tags
        assert tags[LABEL_LOCK_A] + tags[LABEL_LOCK_B] == want.lock_sha256 and tags[LABEL_STACK] == want.stack
        snaps = [s for s in _snapshots(aws, region)
                 if s["SnapshotId"] in {m["Ebs"]["SnapshotId"] for m in ami["BlockDeviceMappings"]}]
        assert snaps and all(_tags(s).get(LABEL_KIND) == "baked-image" for s in snaps), region


def test_a_second_bake_reuses_the_ami_by_its_tags(cli, aws, profile, builder, plant):
    plant(builder, _console("packages"))
    first = cli("bake", str(profile), "--cloud", "aws", "--json")
    assert first.code == 0, first.err[-3000:]
    again = cli("bake", str(profile), "--cloud", "aws", "--json")
    assert again.code == 0, again.err[-3000:]
    assert again.json()["reused"] is True and again.json()["image"]["name"] == first.json()["image"]["name"]
    assert len(aws.faults.calls("RunInstances")) == 1 and len(aws.faults.calls("CreateImage")) == 1


def test_an_ami_of_another_stack_is_not_reused(cli, aws, profile, builder, plant):
    plant(builder, _console("packages"))
    first = cli("bake", str(profile), "--cloud", "aws", "--json").json()["image"]
    for region in REGIONS:  # as if it had been baked from another stack
        [ami] = _amis(aws, region)
        aws.client("ec2", region, direct=True).create_tags(Resources=[ami["ImageId"]],
                                                            Tags=[{"Key": LABEL_STACK, "Value": "0" * 32}])
    plant(builder, _console("packages"))
    r = cli("bake", str(profile), "--cloud", "aws", "--json")
    assert r.code == 0, r.err[-3000:]
    assert r.json()["reused"] is False and r.json()["image"]["name"] != first["name"]


def test_images_lists_one_bake_and_delete_leaves_no_ami_nor_snapshot_in_any_region(cli, aws, profile, builder, plant):
    plant(builder, _console("packages"))
    name = cli("bake", str(profile), "--cloud", "aws", "--json").json()["image"]["name"]
    listed = cli("images", "--cloud", "aws", "--json")
    assert listed.code == 0, listed.err
    (doc,) = listed.json()["images"]
    assert doc["name"] == name and doc["profile"] == "tf-resnet50" and doc["regions"] == list(REGIONS)
    assert doc["size_gib"] and doc["age_days"] is not None
    # each region's copy bills its snapshots: size x the catalog's aws image price x 2 copies
    (price,) = load_catalog(EMBEDDED_DIR).disk_prices.rows_for("aws", "*", "image")
    assert doc["storage"]["copies"] == 2
    assert doc["storage"]["monthly"] == round(doc["size_gib"] * price.price_month * 2, 2)
    assert f"${doc['storage']['monthly']:.2f}/month stored" in cli("images", "--cloud", "aws").out
    assert all(_snapshots(aws, r) for r in REGIONS)  # before: each region's copy has its snapshot
    deleted = cli("images", "delete", name, "--cloud", "aws")
    assert deleted.code == 0, deleted.err
    _nothing_left(aws)  # a deregistered AMI's snapshots would keep billing: none remains
    gone = cli("images", "delete", name, "--cloud", "aws")
    assert gone.code == 4 and "no such baked image" in gone.out


def test_images_profile_says_up_boots_each_regions_copy_and_why_not_where_there_is_none(cli, aws, profile, builder,
                                                                                        plant):
    """``images --profile``: the AMI matches; each region of the plan with a copy boots that region's AMI id, a region
    of the failover order without one (us-east-2: not among the regions trainvm lists) installs, and says so."""
    plant(builder, _console("packages"))
    name = cli("bake", str(profile), "--cloud", "aws", "--json").json()["image"]["name"]
    r = cli("images", "--profile", str(profile), "--cloud", "aws", "--json")
    assert r.code == 0, r.err[-3000:]
    doc = r.json()
    assert [i["name"] for i in doc["images"]] == [name] and doc["images"][0]["storage"]["copies"] == 2
    rows = {b["region"]: b for b in doc["boot"]}
    for region in REGIONS:
        [ami] = _amis(aws, region)
        assert rows[region]["used"] and rows[region]["ref"] == ami["ImageId"], region
    others = [b for region, b in rows.items() if region not in REGIONS]
    assert others and all(not b["used"] and f"{name} has no copy in {b['region']}" in b["reason"] for b in others)


def test_an_interrupted_bake_terminates_the_builder_and_leaves_nothing(cli, aws, profile, builder, plant, monkeypatch):
    """SIGTERM while the builder installs (its console shows a phase forever)."""
    plant(builder, LOG.format(i=0, phase="packages", msg="phase start") + "TRAINVM_STATUS=running:packages\n")
    monkeypatch.setenv("TRAINVM_READY_POLL_SECONDS", "0.05")
    timer = sigterm_when(lambda: aws.faults.calls("RunInstances"))
    try:
        r = cli("bake", str(profile), "--cloud", "aws")
    finally:
        timer.cancel()
    assert r.code == 130, (r.code, r.err[-2000:])
    assert aws.faults.calls("TerminateInstances") and not aws.faults.calls("CreateImage")
    _nothing_left(aws)


def test_an_interrupt_while_the_ami_is_copied_removes_every_ami_and_snapshot(cli, aws, profile, builder, plant):
    """SIGTERM while CopyImage is in flight (the proxy holds it unanswered): the source AMI and its snapshot are gone,
    and so is the builder."""
    plant(builder, _console("packages"))
    aws.faults.hang("CopyImage", times=1)
    def interrupt_once_copying() -> None:
        while not aws.faults.calls("CopyImage"):
            time.sleep(0.02)
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=interrupt_once_copying, daemon=True).start()
    try:
        r = cli("bake", str(profile), "--cloud", "aws")
    finally:
        aws.faults.release()
    assert r.code == 130, (r.code, r.err[-2000:])
    assert aws.faults.calls("DeregisterImage") and aws.faults.calls("DeleteSnapshot")
    _nothing_left(aws)


def test_a_failed_copy_removes_what_the_capture_made(cli, aws, profile, builder, plant):
    plant(builder, _console("packages"))
    aws.faults.fail("CopyImage", "InternalError", times=-1)
    r = cli("bake", str(profile), "--cloud", "aws")
    assert r.code != 0
    _nothing_left(aws)


def test_a_failed_builder_reports_phase_and_line_and_leaves_nothing(cli, aws, profile, builder, plant):
    plant(builder, LOG.format(i=0, phase="driver", msg="phase start") + "TRAINVM_STATUS=running:driver\n"
          + LOG.format(i=1, phase="driver", msg="ERROR: nvidia-driver 535 is not in NVIDIA's ubuntu2204 repository")
          + "TRAINVM_STATUS=failed:driver:212\n")
    r = cli("bake", str(profile), "--cloud", "aws")
    assert r.code == 1
    assert "the bake failed in phase driver at line 212" in r.err
    assert not aws.faults.calls("CreateImage")
    _nothing_left(aws)


def test_up_boots_the_baked_ami_of_the_offers_region_with_the_verify_only_payload(cli, aws, profile, builder, plant):
    """After a bake, ``up`` on AWS boots the copy of the baked AMI in the region it creates in (AMI ids are per
    region), not the public AMI, and says so; before the AWS provider honoured ``LaunchSpec.boot_image`` it booted the
    public AMI with the verify-only payload (a VM that would fail its install check)."""
    plant(builder, _console("packages"))
    baked = cli("bake", str(profile), "--cloud", "aws", "--json")
    assert baked.code == 0, baked.err[-3000:]
    amis = {region: {a["ImageId"] for a in _amis(aws, region)} for region in REGIONS}
    r = cli("up", str(profile), "--yes", "--cloud", "aws", "--json")
    assert r.code == 0, r.err[-3000:]
    doc = r.json()
    assert doc["summary"]["baked_image"]["used"] is True, doc["summary"]["baked_image"]
    region = doc["region"]
    [inst] = [i for i in aws.instances(region) if i["State"]["Name"] in ("pending", "running")]
    assert inst["ImageId"] in amis[region], (inst["ImageId"], amis)


def _payload_config(body: bytes) -> dict[str, str]:
    """The TV_* settings of a payload's startup.sh (what the builder's timer is set up from)."""
    import io
    import re
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        member = tar.extractfile("startup.sh")
        assert member is not None
        script = member.read().decode()
    return {k: v.strip("'\"") for k, v in re.findall(r"^(TV_[A-Z_]+)=(\S*)$", script, re.M)}


def test_the_builder_terminates_itself_after_the_bake_timeout_plus_the_margin(cli, aws, profile, builder, plant,
                                                                               monkeypatch, read_before_release):
    """EC2 has no run limit of its own: a builder whose ``trainvm`` was killed outright ends through the max-run timer
    of its payload (TRAINVM_BAKE_TIMEOUT + BUILDER_LIMIT_MARGIN_S, delete), a guest shutdown that the create request's
    InstanceInitiatedShutdownBehavior=terminate makes a terminate, its root volume with it (DeleteOnTermination).
    The payload is read from the S3 bucket (moto) the builder's bootstrap fetches it from. Not modelled: EC2 acting on
    the shutdown behaviour (the timer and the shutdown run in tests/render/test_bake_limit.py's stub harness)."""
    import base64
    import hashlib
    import re

    from provisioner.bake.run import BUILDER_LIMIT_MARGIN_S

    monkeypatch.setenv("TRAINVM_BAKE_TIMEOUT", "3600")
    plant(builder, _console("packages"))
    s3 = aws.client("s3", "us-east-1", direct=True)
    seen = read_before_release(lambda sha: s3.get_object(  # the bake releases it as it ends: read before that
        Bucket="trainvm-123456789012-us-east-1", Key=f"payloads/{sha}.tar.gz")["Body"].read())
    r = cli("bake", str(profile), "--cloud", "aws", "--json")
    assert r.code == 0, r.err[-3000:]
    assert r.json()["payload"]["state"] == "released"
    [run] = aws.faults.calls("RunInstances")
    assert run.params["InstanceInitiatedShutdownBehavior"] == "terminate"
    roots = [v for k, v in run.params.items() if k.endswith(".Ebs.DeleteOnTermination")]
    assert roots and all(v == "true" for v in roots), run.params
    boot = base64.b64decode(run.params["UserData"]).decode()
    m = re.search(r"^TV_SHA256='([0-9a-f]{64})'$", boot, re.M)
    assert m, boot[:2000]
    [body] = seen
    assert hashlib.sha256(body).hexdigest() == m.group(1)
    cfg = _payload_config(body)
    assert (cfg["TV_MAX_RUN_SECONDS"], cfg["TV_ON_MAX_RUN"], cfg["TV_SHUTDOWN_DOES"], cfg["TV_IDLE_MINUTES"]) == (
        str(3600 + int(BUILDER_LIMIT_MARGIN_S)), "delete", "delete", "0")
