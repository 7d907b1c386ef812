"""What one provisioning run costs and leaves behind (issue 38: found when the GCE bootstrap was booted under QEMU
with systemd as PID 1): its reboot budget ends with it, the initramfs is rebuilt once per driver install, and apt's
downloaded packages do not stay on the disk. Run under the stub harness (tests/stubharness)."""

from __future__ import annotations

import functools
import re
import subprocess

import trainvm_render_support as S


@functools.cache
def script(os_name: str | None = None) -> str:
    lp = S.data_native_to(S.loaded(S.REPO / "profiles/examples/bert-finetune-t4.yaml"), "gcp")
    if os_name:
        lp = S.with_os(lp, os_name)
    return S.render(lp, "gcp").startup_sh


# ---------------------------------------------------------------------------- the reboot budget
def test_the_reboot_budget_belongs_to_one_provisioning_run(make_harness):
    """Provisioning used both reboots (the module did not load twice), then reached ready; after a stop/start the
    module is stale again: that run has a budget of its own (the counter only grew: "reboot limit reached")."""
    h = make_harness(script(), STUB_MODPROBE_FAIL="2")
    for _ in range(2):
        run = h.run()
        assert run.status == "running:driver" and len(run.named("reboot")) == 1, run.output[-3000:]
        h.reboot()
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    assert not h.path("/var/lib/trainvm/reboots").exists()  # reset when the run completes
    h.stop_start()
    later = h.run(STUB_MODPROBE_FAIL="3")  # a third failed load: a stale module after the start
    assert later.status == "running:driver" and len(later.named("reboot")) == 1, later.output[-3000:]
    assert "rebooting (1 of at most 2)" in later.output
    h.reboot()
    assert h.run().status == "ready"
    # a run that never reaches ready keeps its count: test_stub_scenarios.py's bounded-reboot test (1, 1, 0, 0)


# ---------------------------------------------------------------------------- update-initramfs
def test_update_initramfs_runs_once_per_driver_install(make_harness):
    """dpkg's trigger processing asked for three rebuilds in one driver install (issue 38, ~145 s each under TCG):
    each is noted by the script's stand-in on apt's PATH and update-initramfs -u runs once, at the phase's end."""
    h = make_harness(script("debian-12"), os_name="debian-12", STUB_INITRAMFS_RUNS="3")
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    assert run.lines("update-initramfs") == ["update-initramfs -u"]
    assert "update-initramfs -u (asked for 3 times by the installs; run once)" in run.output
    names = [c.name for c in run.calls]
    last_driver_install = max(i for i, c in enumerate(run.calls) if c.name == "apt-get" and any(re.match(r"(nvidia-open|cuda-drivers|nvidia-driver-cuda)=", a) for a in c.args))
    assert last_driver_install < names.index("update-initramfs") < names.index("modprobe")  # before the GPU gate
    assert not h.path("/var/lib/trainvm/initramfs-pending").exists()
    h.reboot()
    assert h.run().named("update-initramfs") == []  # nothing installed, nothing rebuilt


def test_the_stand_in_runs_a_new_kernels_initramfs_at_once(make_harness):
    """update-initramfs -c (the kernel's postinst hook for a new kernel) is not deferred: the reboot boots it."""
    h = make_harness(script())
    assert h.run().status == "ready"
    (h.state / "calls.log").unlink()
    defer = h.path("/var/lib/trainvm/lib/defer")
    env = h.env(PATH=f"{defer}:{h.env()['PATH']}")
    out = subprocess.run(["update-initramfs", "-c", "-k", "6.1.0-56-cloud-amd64"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert (h.state / "calls.log").read_text() == "update-initramfs\t-c\t-k\t6.1.0-56-cloud-amd64\n"
    out = subprocess.run(["update-initramfs", "-u"], env=env, capture_output=True, text=True)
    assert "deferred by trainvm" in out.stdout and h.path("/var/lib/trainvm/initramfs-pending").read_text() == "-u\n"
    assert (h.state / "calls.log").read_text().count("update-initramfs") == 1


# ---------------------------------------------------------------------------- apt's cache
def test_no_downloaded_package_stays_in_apts_cache_after_a_run(make_harness):
    h = make_harness(script("debian-12"), os_name="debian-12")
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    archives = h.path("/var/cache/apt/archives")
    assert archives.is_dir() and sorted(archives.glob("*.deb")) == []
    removed = re.search(r"removed (\d+) downloaded packages from apt's cache", run.output)
    # every package apt-get was asked to install by name (the stub keeps one NAME_VERSION_amd64.deb each; a local
    # .deb given by path is not copied): cuda-keyring aside, the kernel's headers, dkms and the driver set
    named = {a for c in run.named("apt-get") if "install" in c.args for a in c.args[c.args.index("install") + 1:]
             if not a.startswith("-") and not a.endswith(".deb")}
    assert removed and int(removed.group(1)) == len(named) >= 4, (named, run.output[-3000:])
    h.reboot()
    again = h.run()
    assert again.status == "ready" and "downloaded packages" not in again.output  # nothing to clean
