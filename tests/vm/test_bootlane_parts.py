"""The booted-bootstrap lane's pure parts (tests/vm/bootlane.py), without booting anything: the NoCloud user data
carries trainvm's bootstrap byte for byte, what the lane models is in its cloud-config part, and the console's
report lines are read back."""

from __future__ import annotations

import email
import importlib.util
import json
import subprocess
from pathlib import Path

# imported under its own name: tests/realos has a bootlane.py too (the one this module imports)
_spec = importlib.util.spec_from_file_location("vm_bootlane", Path(__file__).with_name("bootlane.py"))
assert _spec is not None and _spec.loader is not None
vm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vm)

BOOTSTRAP = "#!/bin/bash\n# trainvm bootstrap: this VM's user data\necho 'ünïcode' \"$HOME\"\n"


def _parts(data: str) -> dict[str, tuple[str, str]]:
    msg = email.message_from_string(data)
    assert msg.is_multipart()
    return {p.get_filename(): (p.get_content_type(), p.get_payload(decode=True).decode()) for p in msg.get_payload()}


def test_the_bootstrap_is_a_script_part_byte_for_byte_and_the_rest_is_cloud_config() -> None:
    parts = _parts(vm.user_data(BOOTSTRAP, [b"CA ONE", b"CA TWO"], '{"x": 1}'))
    # at every boot, as GCE runs a startup-script: the script's own reboots resume through it
    assert parts["00-trainvm-bootstrap"] == ("text/x-shellscript-per-boot", BOOTSTRAP)
    kind, config = parts["lane.cfg"]
    assert kind == "text/cloud-config" and config.startswith("#cloud-config\n")
    doc = json.loads(config.split("\n", 1)[1])  # JSON is YAML: cloud-init reads it as such
    assert list(doc) == ["bootcmd"]


def test_bootcmd_maps_the_hosts_installs_the_cas_and_gives_the_script_its_environment() -> None:
    script = vm.bootcmd([b"CA ONE", b"CA TWO"], '{"x": 1}')
    assert subprocess.run(["sh", "-n"], input=script, text=True).returncode == 0
    assert "10.0.2.2 developer.download.nvidia.com metadata.google.internal" in script
    assert script.count("/usr/local/share/ca-certificates/trainvm-vm-lane-") == 2
    for unit in ("cloud-final.service", "trainvm-provision.service"):  # the first boot, and after a reboot
        assert f"/etc/systemd/system/{unit}.d/trainvm-vm-lane.conf" in script
    assert "Environment=UV_PYTHON_DOWNLOADS_JSON_URL=file:///srv/pbs/downloads.json" in script
    assert script.index("systemctl daemon-reload") < script.index("systemd-run")
    assert subprocess.run(["sh", "-n"], input=vm.REPORT, text=True).returncode == 0


def test_the_payload_url_is_the_same_store_seen_from_the_guest() -> None:
    url = "http://127.0.0.1:4443/storage/v1/b/b/o/payloads%2Fx.tar.gz?alt=media"
    assert vm.guest_url(url) == "http://10.0.2.2:4443/storage/v1/b/b/o/payloads%2Fx.tar.gz?alt=media"


def test_the_report_lines_are_read_back_from_a_console_with_prefixes() -> None:
    console = ("[  OK  ] Started x\nTRAINVM-VMLANE uname=6.1.0-50-cloud-amd64 pid1=systemd\n"
               "TRAINVM-VMLANE headers=linux-headers-6.1.0-50-cloud-amd64 linux-headers-6.1.0-50-common \n"
               "cloud-init[512]: TRAINVM-VMLANE unit trainvm-idle.timer enabled=enabled active=active\n"
               "TRAINVM-VMLANE end\n")
    m = vm.marks(console)
    assert m["uname"] == "6.1.0-50-cloud-amd64 pid1=systemd"  # the first key takes the rest of its line
    assert m["headers"].split() == ["linux-headers-6.1.0-50-cloud-amd64", "linux-headers-6.1.0-50-common"]
    assert m["unit trainvm-idle.timer"] == "enabled=enabled active=active"


def test_the_kernel_is_kept_when_every_boot_ran_the_image_kernel_and_no_other_image_is_installed() -> None:
    assert subprocess.run(["sh", "-n"], input=vm.REPORT, text=True).returncode == 0
    assert "TRAINVM-VMLANE images=" in vm.REPORT
    ok, said = vm.kernel_kept(["6.1.0-50-cloud-amd64"] * 3,
                              "linux-image-6.1.0-50-cloud-amd64=6.1.176-1 linux-image-cloud-amd64=6.1.176-1 ")
    assert ok and "every boot ran 6.1.0-50-cloud-amd64" in said
    # issue 38's first boot: the headers' install upgraded the metapackage and installed 6.1.0-57, which booted next
    assert not vm.kernel_kept(["6.1.0-50-cloud-amd64", "6.1.0-57-cloud-amd64"],
                              "linux-image-6.1.0-50-cloud-amd64=6.1.176-1 linux-image-6.1.0-57-cloud-amd64=6.1.192-3 "
                              "linux-image-cloud-amd64=6.1.192-3")[0]
    assert not vm.kernel_kept(["6.1.0-50-cloud-amd64"],  # installed, not yet booted
                              "linux-image-6.1.0-50-cloud-amd64=6.1.176-1 linux-image-6.1.0-57-cloud-amd64=6.1.192-3")[0]
    assert not vm.kernel_kept([], "")[0]


def test_the_gpu_gate_is_the_driver_phase_failing_its_own_check_or_its_reboots() -> None:
    spent = "the NVIDIA kernel module is not loaded or is not the installed driver (nvidia-smi: nvidia-smi not found), " \
            "but the reboot limit (2) is reached"
    assert vm.at_gpu_gate("failed:driver:129", spent)
    assert vm.at_gpu_gate("failed:driver:130", "driver/GPU check on n1-standard-8 (expected driver 550.127.05): no GPU")
    assert not vm.at_gpu_gate("failed:driver:44", "nvidia-driver-cuda 550.127.05 is not in NVIDIA's repository")
    assert not vm.at_gpu_gate("running:driver", None)


def test_module_built_reads_dkms_status_and_vermagic_for_the_booted_kernel() -> None:
    """TRAINVM_VM_MODULE=1: the report's dkms and vermagic marks, as the REPORT script prints them, judged for the
    booted kernel (another kernel's build, or a module that is not there, does not count)."""
    kver = "6.1.0-50-cloud-amd64"
    console = "\n".join([
        f"[  1.0] {vm.MARK} dkms=nvidia-current/550.163.01, {kver}, x86_64: installed;",
        f"[  1.1] {vm.MARK} vermagic={kver} SMP preempt mod_unload modversions"])
    m = vm.marks(console)
    assert vm.module_built(m, kver, "550.163.01") == (True, True)
    assert vm.module_built(m, "6.1.0-57-cloud-amd64", "550.163.01") == (False, False)
    assert vm.module_built(m, kver, "550.127.05") == (False, True)
    missing = vm.marks(f"{vm.MARK} dkms=;\n{vm.MARK} vermagic=modinfo: ERROR: Module nvidia-current not found.")
    assert vm.module_built(missing, kver, "550.163.01") == (False, False)
    assert 'vermagic=$(modinfo -F vermagic nvidia-current' in vm.REPORT
