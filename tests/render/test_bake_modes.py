"""The startup script's image modes (docs/bake.md), executed against the stub harness (tests/stubharness):
``bake`` on a GPU-less builder installs the stack and cleans the disk for capture; ``baked`` on a VM booted from
that disk verifies and stages data and installs nothing; ``baked`` on a disk that does not hold the stack fails
at the phase that would install. The stubs model apt, dpkg holds, uv and nvidia-smi; they do not model
cloud-init or the guest agents (their state is planted as plain files), nor a real DKMS build."""

from __future__ import annotations

import re

import pytest
import trainvm_render_support as S

from provisioner.errors import RenderError
from provisioner.render import render_script


def _render(mode: str, cloud: str = "gcp"):
    lp = S.data_native_to(S.loaded(S.GOLDEN_PROFILE), cloud)
    return render_script(lp, S.target_for(cloud, lp), image_mode=mode)


def _plant_machine_state(h) -> None:
    """What a booted builder has that must not reach the image."""
    for rel, text in {
        "/etc/machine-id": "0123456789abcdef0123456789abcdef\n",
        "/var/lib/dbus/machine-id": "0123456789abcdef0123456789abcdef\n",
        "/var/lib/systemd/random-seed": "512 bytes of the builder's entropy\n",
        "/var/lib/systemd/credential.secret": "the builder's credential key\n",
        "/etc/ssh/ssh_host_ed25519_key": "PRIVATE KEY\n",
        "/etc/ssh/ssh_host_ed25519_key.pub": "ssh-ed25519 AAAA\n",
        "/etc/ssh/sshd_config": "PermitRootLogin no\n",
        "/var/lib/cloud/instances/i-123/user-data.txt": "bootstrap\n",
        "/var/lib/google/agent-state": "instance-id 42\n",
        "/root/.bash_history": "export TOKEN=hunter2\n",
        "/home/builder/.bash_history": "ls\n",
        "/etc/trainvm/secrets.env": "HF_TOKEN=hf_secret\n",
        "/mnt/data/glue/train.csv": "data\n",
        "/var/cache/apt/archives/nvidia-driver-cuda_550.127.05-1_amd64.deb": "deb\n",
    }.items():
        p = h.path(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_default_render_has_no_image_mode_code():
    script = _render("").startup_sh
    assert "TV_IMAGE_MODE" not in script and "phase_bake_clean" not in script


def test_unknown_mode_and_container_stacks_are_refused():
    with pytest.raises(RenderError, match="unknown image mode"):
        _render("frozen")
    lp = S.from_dict(S.container_profile())
    with pytest.raises(RenderError, match="container stack cannot be baked"):
        render_script(lp, S.target_for("gcp", lp), image_mode="bake")


def test_bake_installs_the_stack_without_a_gpu_and_cleans_the_disk(make_harness):
    h = make_harness(_render("bake").startup_sh)
    _plant_machine_state(h)
    run = h.run()
    assert run.rc == 0, run.output[-3000:]
    assert run.status == "baked"
    installs = run.installs()
    assert any("nvidia-driver-cuda=" in line or "nvidia-open=" in line for line in installs), installs
    assert any(line.startswith("uv pip install") for line in installs)
    assert not run.named("modprobe")  # no GPU gate on the builder
    assert "no GPU on the builder" in run.output
    # what stays: the install markers and the venv (the stack), the holds
    for marker in ("preflight", "driver", "python", "packages"):
        assert h.path(f"/var/lib/trainvm/done.{marker}").exists(), marker
    assert h.path("/opt/trainvm/venv/bin/python").exists()
    assert "nvidia-open" in (h.state / "held").read_text() or "nvidia-driver-cuda" in (h.state / "held").read_text()
    # what goes: identity, secrets, data, history, agent state, downloads
    assert h.path("/etc/machine-id").read_text() == ""
    # the random seed and the credential key: systemd's "Safely Building Images" (docs/BUILDING_IMAGES.md) says so
    for rel in ("/var/lib/systemd/random-seed", "/var/lib/systemd/credential.secret", "/var/lib/dbus/machine-id", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_ed25519_key.pub",
                "/var/lib/cloud/instances", "/var/lib/google", "/root/.bash_history", "/home/builder/.bash_history",
                "/etc/trainvm/secrets.env", "/mnt/data/glue", "/var/lib/trainvm/profile-hash",
                "/var/cache/apt/archives/nvidia-driver-cuda_550.127.05-1_amd64.deb", "/usr/local/sbin/trainvm-provision"):
        assert not h.path(rel).exists(), rel
    assert h.path("/etc/ssh/sshd_config").exists()  # configuration is not identity
    assert "hunter2" not in h.path("/var/log/trainvm/provision.log").read_text()
    # what the run writes after bake-clean (its last phase record, the final status and report, the log lines of
    # the finish) and the builder's payload (the bootstrap's unpacked copy, the agent that wrote the report) go too:
    # found by the real-OS lane (tests/realos/bakelane.py), where the captured image still held them
    for rel in ("/var/lib/trainvm/status.json", "/var/lib/trainvm/report.json", "/var/lib/trainvm/phases/bake-clean",
                "/opt/trainvm/payloads/stub", "/opt/trainvm/current"):
        assert not (h.path(rel).exists() or h.path(rel).is_symlink()), rel
    logs = {p.name: p.stat().st_size for p in h.path("/var/log/trainvm").iterdir() if p.is_file()}
    assert logs and not any(logs.values()), logs
    assert "TRAINVM_STATUS=baked" in run.output  # the builder's console still says so (what bake follows)


def test_baked_boot_verifies_and_installs_nothing(make_harness):
    h = make_harness(_render("bake").startup_sh)
    assert h.run().status == "baked"
    h.reboot()  # a new VM booting the captured disk, with its own (baked-mode) payload
    h.unpack_payload()  # what the VM's bootstrap does before it runs the script
    h.script.write_text(_render("baked").startup_sh, encoding="utf-8")
    run = h.run()
    assert run.rc == 0, run.output[-3000:]
    assert run.status == "ready"
    assert run.installs() == []
    downloads = [c.line for c in run.named("curl") if "metadata.google.internal" not in c.line]
    assert downloads == []
    assert run.named("modprobe")  # the GPU gate ran on the GPU VM
    assert run.report and run.report["status"] == "ready" and run.report["driver"] == "550.127.05"
    assert run.report["packages"]["torch"] == "2.4.1+cu124"


def test_baked_boot_of_a_disk_without_the_stack_fails_at_the_phase_that_would_install(make_harness):
    h = make_harness(_render("baked").startup_sh)
    run = h.run()
    assert run.rc == 1
    assert run.status.startswith("failed:preflight:")
    assert "boots a baked image, but the preflight phase would install something" in run.output
    assert run.installs() == []


def _render_nvme(mode: str):
    """bert-pretrain-8xa100 on its 8-GPU GCE shape: several local NVMe disks, striped as RAID0 by mdadm at boot."""
    lp = S.data_native_to(S.loaded(S.REPO / "profiles/examples/bert-pretrain-8xa100.yaml"), "gcp")
    return render_script(lp, S.target_for("gcp", lp), image_mode=mode)


A100X8 = {"STUB_GPU_NAME": "NVIDIA A100-SXM4-40GB", "STUB_GPU_MEM": "40960", "STUB_GPU_CC": "8.0", "STUB_GPU_COUNT": "8"}


def test_a_baked_boot_that_stripes_local_nvme_installs_nothing_mdadm_comes_with_the_bake(make_harness):
    """mdadm is not in Debian's base system: the bake installs it (the profile's scratch is on local NVMe), so the
    baked boot assembles RAID0 with the image's mdadm and installs no package."""
    h = make_harness(_render_nvme("bake").startup_sh, nvme_disks=4, **A100X8)
    bake = h.run()
    assert bake.rc == 0 and bake.status == "baked", bake.output[-3000:]
    assert any(line.endswith("install --no-install-recommends mdadm") for line in bake.installs()), bake.installs()
    h.reboot()
    h.unpack_payload()
    h.script.write_text(_render_nvme("baked").startup_sh, encoding="utf-8")
    run = h.run()
    assert run.rc == 0 and run.status == "ready", run.output[-3000:]
    assert run.installs() == []
    create = [c for c in run.named("mdadm") if c.args[:1] == ["--create"]]
    assert len(create) == 1 and "--raid-devices=4" in create[0].args


def test_a_shape_without_local_nvme_bakes_no_mdadm():
    lp = S.data_native_to(S.loaded(S.GOLDEN_PROFILE), "gcp")
    none = render_script(lp, S.target_for("gcp", lp, local_nvme_gib=0), image_mode="bake").startup_sh
    assert re.search(r"^TV_NVME='?none'?$", none, re.M) and "tv_bake_raid_tools" not in none
    some = render_script(lp, S.target_for("gcp", lp, local_nvme_gib=375), image_mode="bake").startup_sh
    assert re.search(r"^TV_NVME='?optional'?$", some, re.M) and "\n  tv_bake_raid_tools\n" in some


def test_the_stack_identity_says_whether_the_image_holds_mdadm():
    """An image baked for a shape without local NVMe (no mdadm) never matches an offer that stripes NVMe."""
    from provisioner.providers.image_identity import stack_fields
    from provisioner.render import build_context

    lp = S.data_native_to(S.loaded(S.REPO / "profiles/examples/bert-pretrain-8xa100.yaml"), "gcp")
    with_nvme = build_context(lp, S.target_for("gcp", lp), None, "")
    without = build_context(lp, S.target_for("gcp", lp, local_nvme_gib=0), None, "")
    assert stack_fields(with_nvme)["raid_tools"] is True
    assert with_nvme.nvme != "none"
    if without.nvme == "none":  # the profile itself may ask for local NVMe (then every offer has it)
        assert stack_fields(without)["raid_tools"] is False
