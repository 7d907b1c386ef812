"""Issue 38: ``bake`` and ``images`` on the local cloud. The baker captures with the real ``qemu-img`` on small qcow2
files (no boot); the bake of a provisioned VM (boot, install, bake, boot again offline) is the VM lane's
(docs/local.md "Bake on local")."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from provisioner.bake import use
from provisioner.bake.run import baker_for, plan_bake
from provisioner.errors import CloudError, ConflictError, InvalidRequestError, ProviderError
from provisioner.hooks import HOOKS, bakers
from provisioner.profile import LoadedProfile, load_profile
from provisioner.providers.base import InstanceRecord
from provisioner.providers.image_identity import LABEL_BASE, SCRIPT_VERSION, ImageIdentity, identity_of
from provisioner.providers.local import bake, host, request, vms
from provisioner.providers.local.bake import LocalBaker
from provisioner.providers.local.provider import LocalProvider
from provisioner.providers.local.request import VmFiles
from tests.helpers import REPO

TF = REPO / "profiles" / "examples" / "tf-resnet50.yaml"  # a committed, fresh lock: exact, so it can be baked


def exact_local_profile() -> LoadedProfile:
    """tf-resnet50 (a committed, fresh lock) without its gs:// data, which no local VM can read."""
    loaded = load_profile(TF)
    assert loaded.lock_state == "fresh"
    return dataclasses.replace(loaded, profile=loaded.profile.model_copy(update={"data": []}))
OFFER = host.host_offers(cpu_count=2, meminfo="MemTotal: 8388608 kB\n", machine="x86_64")[0]
IDENTITY = ImageIdentity(stack="a" * 32, lock_sha256="b" * 64, script_version=SCRIPT_VERSION,
                         base_image="debian-12-sha256-" + "c" * 32)
needs_qemu_img = pytest.mark.skipif(shutil.which("qemu-img") is None or shutil.which("qemu-io") is None,
                                    reason="qemu-img/qemu-io not installed (Debian package qemu-utils)")


def qemu(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def builder(root: Path, base: Path, name: str = "tv-a-bake") -> InstanceRecord:
    """A stopped builder as LocalProvider.create leaves it: its folder, its record, an overlay on ``base`` holding
    what the install phases wrote (1 MiB of 0xab at 1 MiB)."""
    files = VmFiles(root / name)
    files.root.mkdir(parents=True)
    qemu("qemu-img", "create", "-f", "qcow2", "-b", str(base), "-F", "qcow2", str(files.disk), "64M")
    qemu("qemu-io", "-c", "write -P 0xab 1M 1M", str(files.disk))
    vms.save(files, {"profile": "tf", "hash": "ab" * 32, "base": str(base), "ssh_user": "debian", "ssh_port": 1})
    record = LocalProvider(root).find(name)
    assert record is not None and record.state == "STOPPED"
    return record


@pytest.fixture
def base(tmp_path: Path) -> Path:
    path = tmp_path / "base.qcow2"
    qemu("qemu-img", "create", "-f", "qcow2", str(path), "64M")
    qemu("qemu-io", "-c", "write -P 0x11 0 1M", str(path))  # the OS base's own data
    return path


def test_the_local_cloud_bakes_through_its_baker_hook(tmp_path: Path) -> None:
    assert "local" in bakers()
    hook = HOOKS["local"].baker
    assert hook is not None
    baker = hook(LocalProvider(tmp_path))
    assert isinstance(baker, LocalBaker) and baker.folder == tmp_path / "images"
    assert baker.builder_shape == host.host_offers()[0].instance_type
    assert baker.builder_offer(OFFER).gpu_count == 0 and baker.builder_offer(OFFER).region == "this-machine"
    with pytest.raises(TypeError, match="LocalProvider"):
        hook(object())  # type: ignore[arg-type]
    # the folder of the images is never a VM's
    with pytest.raises(InvalidRequestError, match="not a local VM name"):
        LocalProvider(tmp_path)._files("images")


@needs_qemu_img
def test_capture_is_a_standalone_qcow2_with_the_identity_labels(tmp_path: Path, base: Path) -> None:
    root = tmp_path / "local"
    baker = LocalBaker(LocalProvider(root))
    image = baker.capture(builder(root, base), IDENTITY, "tf-resnet50")
    disk = Path(image.ref)
    assert disk.parent == root / "images" and disk.name == f"{image.name}.qcow2" and image.status == "READY"
    assert image.labels == IDENTITY.labels("tf-resnet50") and image.cloud == "local"
    sidecar = json.loads((root / "images" / f"{image.name}.json").read_text())
    assert sidecar["labels"] == IDENTITY.labels("tf-resnet50") and sidecar["base_file"] == str(base)
    info = json.loads(qemu("qemu-img", "info", "--output=json", str(disk)))
    assert "backing-filename" not in info and info["format"] == "qcow2"  # no longer on the base's chain
    base.unlink()  # the base may go: the image holds its data and the builder's
    qemu("qemu-io", "-c", "read -P 0x11 0 1M", "-c", "read -P 0xab 1M 1M", "-c", "read -P 0 2M 1M", str(disk))
    assert baker.images() == [image]
    assert baker.find(IDENTITY) == image
    other = ImageIdentity(stack="d" * 32, lock_sha256="b" * 64, script_version=SCRIPT_VERSION,
                          base_image=IDENTITY.base_image)
    assert baker.find(other) is None


@needs_qemu_img
def test_a_failed_capture_leaves_nothing_and_a_running_builder_is_refused(tmp_path: Path, base: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "local"
    baker = LocalBaker(LocalProvider(root))
    record = builder(root, base)
    monkeypatch.setattr(bake, "convert_argv", lambda src, dst: ["qemu-img", "convert", "-O", "qcow2", "/nonexistent", str(dst)])
    with pytest.raises(ProviderError, match="qemu-img convert exited"):
        baker.capture(record, IDENTITY, "tf")
    assert [p.name for p in (root / "images").iterdir()] == []
    monkeypatch.setattr(vms, "pid_of", lambda files: 4242)
    with pytest.raises(CloudError, match="still runs"):
        baker.capture(record, IDENTITY, "tf")
    with pytest.raises(CloudError, match="is gone"):
        baker.capture(InstanceRecord(name="tv-none", cloud="local", region="this-machine", zone=None,
                                     instance_type="", state="STOPPED", profile=None, hash=None),
                              IDENTITY, "tf")


@needs_qemu_img
def test_an_image_a_vm_boots_is_not_deleted_until_the_vm_is_down(tmp_path: Path, base: Path) -> None:
    root = tmp_path / "local"
    provider = LocalProvider(root)
    baker = LocalBaker(provider)
    image = baker.capture(builder(root, base), IDENTITY, "tf")
    provider.delete("tv-a-bake")
    vm = VmFiles(root / "tv-b")  # a VM `up` made on the baked image: its overlay's base is the image
    vm.root.mkdir()
    vms.save(vm, {"profile": "tf", "hash": "ab" * 32, "base": image.ref, "ssh_user": "debian", "ssh_port": 1})
    with pytest.raises(ConflictError, match="tv-b boots .*trainvm down"):
        baker.delete_image(image.name)
    assert Path(image.ref).is_file()
    assert provider.delete("tv-b")
    assert baker.delete_image(image.name) and not baker.delete_image(image.name)
    assert list((root / "images").glob("trainvm-*")) == [] and baker.images() == []
    assert not baker.delete_image("../tv-b") and not baker.delete_image("base")


def test_the_base_image_is_named_by_its_content_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    baker = LocalBaker(LocalProvider(tmp_path / "local"))
    monkeypatch.delenv("TRAINVM_LOCAL_IMAGE_DEBIAN_12", raising=False)
    with pytest.raises(InvalidRequestError, match="set TRAINVM_LOCAL_IMAGE_DEBIAN_12"):
        baker.base_image("debian-12", None)
    path = tmp_path / "debian.qcow2"
    path.write_bytes(b"one")
    monkeypatch.setenv("TRAINVM_LOCAL_IMAGE_DEBIAN_12", str(path))
    reads: list[Path] = []
    real = bake.file_sha256
    monkeypatch.setattr(bake, "file_sha256", lambda p: reads.append(p) or real(p))
    first = baker.base_image("debian-12", None)
    assert first == bake.base_id("debian-12", real(path)) and first.startswith("debian-12-sha256-")
    assert baker.base_image("debian-12", None) == first and reads == [path]  # read once
    path.write_bytes(b"another download in its place")
    assert baker.base_image("debian-12", None) != first and len(reads) == 2
    assert IDENTITY.labels()[LABEL_BASE] == IDENTITY.base_image  # a label value as it is (no digest of it)


def test_bake_and_up_on_local_agree_on_the_rehearsed_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder renders the stack ``up`` renders on this machine (the profile's GPU, rehearsed), so ``up``'s
    lookup finds what the bake made."""
    from provisioner.render.context import build_context
    from provisioner.render.script import rehearsed_gpu, render_for_offer
    from provisioner.render.script_context import target_from_offer

    loaded = exact_local_profile()
    base = tmp_path / "debian.qcow2"
    base.write_bytes(b"base")
    monkeypatch.setenv("TRAINVM_LOCAL_IMAGE_UBUNTU_22_04", str(base))  # tf-resnet50 runs ubuntu-22.04
    monkeypatch.setenv("TRAINVM_LOCAL_DIR", str(tmp_path / "local"))
    baker = baker_for("local", LocalProvider(tmp_path / "local"))
    bp = plan_bake(loaded, baker, "local", None)
    sh = bp.rendered.startup_sh
    assert bp.offer.cloud == "local" and "TV_REHEARSAL=1" in sh and "TV_IMAGE_MODE=bake" in sh
    # the bake's GPU gate (none on a builder) is the one that runs: it is defined after the rehearsal's
    assert sh.rindex("tv_gpu_gate() {  # the builder has no GPU") > sh.index("tv_gpu_gate() {  # a rehearsal")
    assert bp.builder_offer.instance_type == baker.builder_shape and bp.builder_offer.gpu_count == 0
    stack, lock = use.offer_stack(loaded, bp.offer)  # what `up` looks for on this offer
    up_ctx = build_context(loaded, target_from_offer(bp.offer, rehearsed_gpu(loaded)), None, "baked")
    assert (stack, lock) == (bp.identity.stack, bp.identity.lock_sha256) == (identity_of(up_ctx, "x").stack, up_ctx.lock_sha256)
    assert "TV_REHEARSAL=1" in render_for_offer(loaded, bp.offer, "baked").startup_sh


def test_up_finds_the_baked_image_and_boots_it_as_the_overlays_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = exact_local_profile()
    base = tmp_path / "debian.qcow2"
    base.write_bytes(b"base")
    monkeypatch.setenv("TRAINVM_LOCAL_IMAGE_UBUNTU_22_04", str(base))  # tf-resnet50 runs ubuntu-22.04
    provider = LocalProvider(tmp_path / "local")
    baker = LocalBaker(provider)
    bp = plan_bake(loaded, baker, "local", None)
    chooser = use.BakedImages(loaded, {"local": provider})
    missing = chooser.choose(bp.offer)
    assert missing is not None and missing.image is None and "no baked image for this stack on local" in (missing.reason or "")
    # a capture's result, without qemu-img: the files capture writes
    folder = tmp_path / "local" / "images"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainvm-tf-1.qcow2").write_bytes(b"qcow2")
    (folder / "trainvm-tf-1.json").write_text(json.dumps({"labels": bp.identity.labels("tf-resnet50"), "created": "2026-12-07T20:00:00Z"}))
    found = use.BakedImages(loaded, {"local": provider}).choose(bp.offer)
    assert found is not None and found.image is not None and found.image.ref == str(folder / "trainvm-tf-1.qcow2")
    spec = dataclasses.replace(_spec(), boot_image=found.image.ref)  # what launch_spec(baked=found.image) sets
    assert request.base_image(spec) == str(folder / "trainvm-tf-1.qcow2")
    assert request.overlay_argv(request.base_image(spec) or "", "disk.qcow2", 50)[5] == str(folder / "trainvm-tf-1.qcow2")
    base.write_bytes(b"a newer base in its place")  # the OS base changed: the image is not this base's any more
    stale = use.BakedImages(loaded, {"local": provider}).choose(bp.offer)
    assert stale is not None and stale.image is None and "built from OS image" in (stale.reason or "")


def _spec():  # type: ignore[no-untyped-def]
    from tests.local.test_local_provider import spec

    return spec()


@needs_qemu_img
def test_run_bake_on_local_captures_the_builder_and_records_the_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``trainvm bake --cloud local`` through bake/run.py: the provider's create (here: the builder's overlay and a
    console that says ``baked``, instead of a QEMU boot), the wait, the stop, the capture with the real qemu-img, the
    builder deleted, the record of bakes written; then ``up``'s lookup finds the image."""
    from provisioner.bake import records, run

    loaded, base, root = _bake_setup(tmp_path, monkeypatch, run)
    made: list[str] = []

    def create(self: LocalProvider, spec, offer):  # type: ignore[no-untyped-def]
        made.append(spec.name)
        assert spec.boot_image is None and spec.labels["trainvm-role"] == "builder"
        record = builder(self.root, base, spec.name)
        (self.root / spec.name / "console.log").write_text("TRAINVM_STATUS=running:driver\nTRAINVM_STATUS=baked\n")
        return record

    monkeypatch.setattr(LocalProvider, "create", create)
    assert run.run_bake(TF, cloud="local", region=None, json_out=True) == 0
    doc = json.loads(capsys.readouterr().out)
    image = doc["image"]
    assert doc["baked"] and image["cloud"] == "local" and Path(image["ref"]).is_file()
    assert not (root / made[0]).exists()  # the builder was deleted
    # and its payload with it: nothing expires in the local store, and no other VM names it
    assert doc["payload"]["state"] == "released" and list((root / "store" / "payloads").iterdir()) == []
    assert [r["name"] for r in records.load() if r["cloud"] == "local"] == [image["name"]]  # plan's offline record
    choice = use.BakedImages(loaded, {"local": LocalProvider(root)}).choose(host.host_offers()[0])
    assert choice is not None and choice.image is not None and choice.image.name == image["name"]
    # a second bake of the same stack reuses it
    assert run.run_bake(TF, cloud="local", region=None, json_out=True) == 0
    assert json.loads(capsys.readouterr().out)["reused"] and len(made) == 1


@needs_qemu_img
def test_run_bake_on_local_keeps_the_builders_payload_while_another_vm_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The builder's payload is released as ``down`` releases a VM's (providers/store.py ``release``): a VM of the
    store that carries its ``trainvm-payload`` label keeps it, and the bake says which."""
    from provisioner.bake import run

    loaded, base, root = _bake_setup(tmp_path, monkeypatch, run)

    def create(self: LocalProvider, spec, offer):  # type: ignore[no-untyped-def]
        record = builder(self.root, base, spec.name)
        (self.root / spec.name / "console.log").write_text("TRAINVM_STATUS=baked\n")
        other = VmFiles(self.root / "tv-other")  # a stopped VM created with the same payload
        other.root.mkdir()
        vms.save(other, {"profile": "tf", "hash": "ab" * 32, "payload": spec.payload.sha256[:16], "ssh_user": "debian"})
        return record

    monkeypatch.setattr(LocalProvider, "create", create)
    assert run.run_bake(TF, cloud="local", region=None, json_out=True) == 0
    payload = json.loads(capsys.readouterr().out)["payload"]
    assert payload["state"] == "kept" and payload["users"] == ["tv-other"]
    assert len(list((root / "store" / "payloads").iterdir())) == 1
    assert run.run_bake(TF, cloud="local", region=None, json_out=False) == 0  # reused: nothing staged or said
    assert "payload" not in capsys.readouterr().err


def _bake_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run):  # noqa: ANN001, ANN202 - bake/run.py
    """(the exact local profile, a 64M base image, the local cloud's folder), with the settings pointing at them and
    bake/run.py loading that profile."""
    loaded = exact_local_profile()
    base = tmp_path / "ubuntu.qcow2"
    qemu("qemu-img", "create", "-f", "qcow2", str(base), "64M")
    root = tmp_path / "local"
    monkeypatch.setenv("TRAINVM_LOCAL_IMAGE_UBUNTU_22_04", str(base))
    monkeypatch.setenv("TRAINVM_LOCAL_DIR", str(root))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(run, "load_profile", lambda path: loaded)
    return loaded, base, root
