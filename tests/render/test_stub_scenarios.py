"""The rendered script, executed unprivileged against stub commands (tests/stubharness).

Each scenario of ISSUE 4 is one test: happy path (per cloud and OS), driver mismatch, Secure
Boot, second run, bounded reboots, dpkg lock, stop/start re-staging, NVSwitch + RAID0, toolkit
and hashed lock. The idle watchdog and the lifecycle scripts: test_stub_lifecycle.py."""

from __future__ import annotations

import functools
import os
import re
import sys

import pytest
import trainvm_render_support as S

from provisioner.verify.compare import compare

DRIVER = "550.127.05"
APT_PREFIX = ["-y", "-q", "-o", "DPkg::Lock::Timeout=600", "-o", "Acquire::Retries=0"]


@functools.cache
def script(profile: str = "bert-finetune-t4", cloud: str = "gcp", os_name: str | None = None, **kw) -> str:
    lp = S.data_native_to(S.loaded(S.REPO / "profiles/examples" / f"{profile}.yaml"), cloud)
    if os_name:
        lp = S.with_os(lp, os_name)
    return S.render(lp, cloud, **kw).startup_sh  # s3:// data on AWS needs the bootstrap


def assert_apt_rules(run) -> None:
    """Rule 3: every apt-get call is non-interactive, -y, waits for the dpkg lock, is retried by tv_retry alone
    (apt's own retries off: issue 37) (``indextargets``, a read-only query of the downloaded indexes, takes no lock). needrestart's
    apt hook is suspended: in mode "a" it may restart the unit running this script."""
    for call in run.named("apt-get"):
        if call.args[:1] == ["indextargets"]:
            continue
        assert call.args[: len(APT_PREFIX)] == APT_PREFIX, call.line
    assert run.apt_env and set(run.apt_env) == {"noninteractive,needrestart=1"}


def do(h, **kw):
    return h.run(**kw)


# ---------------------------------------------------------------------------- happy paths
def test_happy_path_gcp_ends_ready_with_a_correct_report(make_harness):
    h = make_harness(script())
    run = do(h)
    assert run.rc == 0, run.output[-3000:]
    assert run.status == "ready"
    assert run.report_lines == 1  # printed once
    rep = run.report
    assert rep == __import__("json").loads(h.path("/var/lib/trainvm/report.json").read_text())
    assert rep["schema"] == 1 and rep["source"] == "vm" and rep["status"] == "ready"
    assert rep["driver"] == DRIVER and rep["cuda_driver_max"] == "12.4"
    assert rep["gpus"] == [{"name": "Tesla T4", "memory_mib": 15360, "compute_capability": "7.5"}]
    assert rep["framework"] == {"name": "torch", "version": "2.4.1+cu124", "cuda": "12.4", "cudnn": "90100", "cuda_available": True}
    assert rep["cudnn"] == "9.1.0" and rep["cuda_toolkit"] is None and rep["python"] == "3.11.9"
    assert rep["packages"]["torch"] == "2.4.1+cu124" and rep["packages"]["transformers"] == "4.44.2"
    assert rep["os"]["id"] == "ubuntu" and rep["os"]["version"] == "22.04"
    assert rep["cpu"]["count"] == 8 and rep["memory_gib"] == 31.4
    assert rep["data"] == [{"dest": "/mnt/data/glue", "status": "staged"}]
    assert set(rep["phases"]) == {"preflight", "driver", "cuda", "python", "packages", "env", "data", "watchdog"}
    assert all(p["status"] in ("done", "skipped") for p in rep["phases"].values())
    # the single comparison function accepts it: the VM matches the profile
    verdict = compare(S.loaded(S.GOLDEN_PROFILE).profile.model_dump(mode="json"), rep)
    assert verdict.status == "match", [f for f in verdict.fields if not f.ok]
    # rule 3 (apt), 4 (auto-updates off), 5 (keyring), 6 (exact pin), 8 (holds), 9 (headers), 14, 16, 17, 19, 20
    assert_apt_rules(run)
    systemctl = run.lines("systemctl")
    assert "systemctl disable --now unattended-upgrades.service apt-daily.timer apt-daily-upgrade.timer" in systemctl
    assert "systemctl mask unattended-upgrades.service apt-daily-upgrade.service" in systemctl
    assert not any("apt-daily.service" in s and "stop" in s for s in systemctl)
    assert "Unattended-Upgrade::Package-Blacklist" in h.path("/etc/apt/apt.conf.d/99trainvm").read_text()
    apt = run.lines("apt-get")
    keyring = [c for c in run.named("curl") if any(a.endswith("cuda-keyring_1.1-1_all.deb") for a in c.args)]
    assert keyring and "repos/ubuntu2204/x86_64/" in keyring[0].args[-1]
    assert run.lines("sha256sum")  # checked before the install
    assert any(line.endswith("cuda-keyring_1.1-1_all.deb") for line in apt)
    assert not run.named("apt-key")
    assert "Pin: version 550.127.05-*" in h.path("/etc/apt/preferences.d/trainvm-nvidia-driver").read_text()
    assert any(line.endswith(f"install nvidia-open={DRIVER}-0ubuntu1") for line in apt)
    names = [a.split("=")[0] for c in run.named("apt-get") if "install" in c.args for a in c.args[c.args.index("install") + 1:]]
    assert not [n for n in names if n in ("cuda", "cuda-toolkit", "cudnn", "nvidia-cuda-toolkit") or re.match(r"cuda-(drivers|\d+-\d+$)", n)]
    assert any(line.endswith("install --no-install-recommends linux-headers-5.15.0-1071-gcp dkms") for line in apt)
    held = " ".join(run.lines("apt-mark"))
    for pkg in ("nvidia-open", "linux-image-5.15.0-1071-gcp", "linux-headers-5.15.0-1071-gcp", "linux-image-gcp", "linux-gcp"):
        assert f" {pkg}" in held
    # the kernel metapackages are held before the headers' install (apt would upgrade them with their source's
    # headers metapackage), and no headers metapackage is installed (it names the archive's newest kernel)
    order = [c.line for c in run.calls if c.name in ("apt-get", "apt-mark")]
    headers = next(i for i, line in enumerate(order) if "linux-headers-5.15.0-1071-gcp dkms" in line)
    assert any(" hold " in line and " linux-image-gcp" in line and " linux-gcp" in line for line in order[:headers]), order
    assert not any(re.search(r" install .*linux-headers-gcp\b", line) for line in apt), apt
    assert "systemctl enable nvidia-persistenced.service" in systemctl
    assert not any("fabricmanager" in line for line in apt + systemctl)
    uv = run.lines("uv")
    assert "uv python install --no-bin 3.11.9" in uv
    pip = [line for line in uv if line.startswith("uv pip install") and "/datatools/" not in line]
    assert len(pip) == 1 and "--only-binary :all:" in pip[0] and "--extra-index-url" not in pip[0]
    # R1: the PyTorch index is explicit and serves only the torch-build pins (uv sources)
    assert pip[0].endswith("-r " + str(h.path("/var/lib/trainvm/stack/pyproject.toml")))
    project = h.path("/var/lib/trainvm/stack/pyproject.toml").read_text()
    assert '[tool.uv.sources]\ntorch = { index = "pytorch" }\n\n' in project and "explicit = true" in project
    assert 'url = "https://download.pytorch.org/whl/cu124"' in project and '"datasets==2.21.0",' in project
    # the data: the gs:// copy tool from its hash-pinned lock into its own venv (the image's python3), then the copier
    tool = h.path("/opt/trainvm/datatools/gs")
    assert f"uv venv -q --python /usr/bin/python3 {tool}" in uv
    assert (f"uv pip install -q --python {tool}/bin/python --require-hashes --only-binary :all: -r "
            f"{h.path('/var/lib/trainvm/datatools-gs.txt')}") in uv
    lock = (S.REPO / "templates/datatools/gs-ubuntu-22.04.txt").read_text()
    assert h.path("/var/lib/trainvm/datatools-gs.txt").read_text() == "".join(ln for ln in lock.splitlines(True) if not ln.startswith("#"))
    assert run.lines("sdk") == ["sdk gs client vm-service-account", "sdk gs list example-ml-data glue/"]  # the VM's own identity
    assert sorted(p.name for p in h.path("/mnt/data/glue").iterdir()) == ["part-00000", "part-00001"]
    assert not run.named("gcloud") and not run.named("aws") and not run.named("azcopy")
    puts = [c.args[-1] for c in run.named("curl") if "PUT" in c.args]
    assert puts[-2:] == ["http://metadata.google.internal/computeMetadata/v1/instance/guest-attributes/trainvm/status",
                         "http://metadata.google.internal/computeMetadata/v1/instance/guest-attributes/trainvm/report"]
    assert len(puts) <= 10
    assert not run.named("reboot")
    env = h.path("/etc/trainvm/env").read_text()
    assert 'CUBLAS_WORKSPACE_CONFIG=":4096:8"' in env and 'PYTHONHASHSEED="0"' in env
    assert "trainvm-env" in h.path("/opt/trainvm/venv/bin/activate").read_text()
    assert "EnvironmentFile=/etc/trainvm/env" in h.path("/usr/local/bin/trainvm-run").read_text()
    assert h.path("/etc/trainvm/watchdog.conf").read_text() == (
            "IDLE_MINUTES=60\nON_IDLE=stop\nON_MAX_RUN=stop\nSHUTDOWN_DOES=stop\nGPU_IDLE_UTIL=5\nGPU_IDLE_MINUTES=60\n")
    assert "systemctl enable --now trainvm-idle.timer" in systemctl
    assert h.path("/usr/local/sbin/trainvm-provision").read_text() == h.script.read_text()
    assert not h.path("/etc/systemd/system/trainvm-provision.service").exists()  # GCE re-runs the script itself
    assert re.search(r"^\S+ trainvm driver: phase start$", h.path("/var/log/trainvm/provision.log").read_text(), re.M)


@pytest.mark.parametrize(("cloud", "os_name"), [("azure", "ubuntu-24.04"), ("aws", "debian-12")])
def test_happy_path_run_once_clouds_install_the_resume_unit(make_harness, cloud, os_name):
    h = make_harness(script(cloud=cloud, os_name=os_name), cloud=cloud, os_name=os_name)
    run = do(h)
    assert run.rc == 0, run.output[-3000:]
    assert run.status == "ready" and run.report["os"]["id"] == os_name.split("-")[0]
    unit = h.path("/etc/systemd/system/trainvm-provision.service").read_text()
    assert "ExecStart=/usr/local/sbin/trainvm-provision" in unit and "Type=oneshot" in unit
    assert "systemctl enable trainvm-provision.service" in run.lines("systemctl")
    assert not any("guest-attributes" in line for line in run.lines("curl"))
    assert '"status": "ready"' in h.path("/var/lib/trainvm/status.json").read_text()
    assert_apt_rules(run)
    apt = " ".join(run.lines("apt-get"))
    if os_name == "debian-12":
        assert "repos/debian12/x86_64/" in " ".join(run.lines("curl"))
        assert "Components: main contrib" in h.path("/etc/apt/sources.list.d/debian.sources").read_text()
        assert "linux-headers-cloud-amd64" not in apt and "install --no-install-recommends linux-headers-" in apt
        assert " linux-image-cloud-amd64" in " ".join(run.lines("apt-mark"))
    else:
        assert "repos/ubuntu2404/x86_64/" in " ".join(run.lines("curl"))
        assert "linux-headers-azure" not in apt and "install --no-install-recommends linux-headers-" in apt
        assert " linux-image-azure" in " ".join(run.lines("apt-mark"))


# ---------------------------------------------------------------------------- failures
def test_driver_mismatch_reported_by_nvidia_smi_fails_with_observed_values(make_harness):
    h = make_harness(script(), STUB_LOADED_DRIVER="550.90.07")
    run = do(h)
    assert run.rc != 0
    assert re.fullmatch(r"failed:driver:\d+", run.status)
    assert run.report["status"] == run.status and run.report_lines == 1
    assert run.report["driver"] == "550.90.07" and run.report["gpus"][0]["name"] == "Tesla T4"
    assert "MISMATCH stack.driver: expected 550.127.05, found 550.90.07" in run.output
    assert "expected driver 550.127.05" in run.report["error"]
    assert run.report["phases"]["driver"]["status"] == "failed"
    assert not run.named("reboot")  # a wrong driver is not fixed by rebooting
    assert not run.lines("uv")  # nothing after the failed phase


def test_secure_boot_on_is_a_clear_failure_without_reboot_loop(make_harness):
    h = make_harness(script(), STUB_SECURE_BOOT="enabled")
    for _ in range(2):  # GCE re-runs the script on every boot: same answer, no reboot
        run = do(h)
        assert run.rc != 0
        assert re.fullmatch(r"failed:secure-boot:\d+", run.status)
        assert "Secure Boot is enabled" in run.report["error"]
        assert not run.named("reboot")
        assert not any("nvidia-open" in line for line in run.lines("apt-get"))
    assert not h.path("/var/lib/trainvm/reboots").exists()


def test_module_rejected_by_secure_boot_at_load_time_does_not_reboot(make_harness):
    h = make_harness(script(), STUB_MODPROBE_FAIL="9", STUB_MODPROBE_ERROR="Key was rejected by service")
    run = do(h)
    assert re.fullmatch(r"failed:secure-boot:\d+", run.status) and not run.named("reboot")


def test_framework_without_gpu_access_fails_the_packages_phase(make_harness):
    h = make_harness(script(), STUB_CUDA_AVAILABLE="0")
    run = do(h)
    assert run.rc != 0 and re.fullmatch(r"failed:packages:\d+", run.status)
    assert "cuda available: false" in run.output
    assert run.report["framework"]["cuda_available"] is False


def test_missing_driver_version_in_repository_never_falls_back(make_harness):
    h = make_harness(script(), STUB_REPO_DRIVERS="570.86.15 550.90.07")
    run = do(h)
    assert re.fullmatch(r"failed:driver:\d+", run.status)
    assert "is not in NVIDIA's repository" in run.report["error"]
    assert not any("nvidia-open" in line for line in run.lines("apt-get"))


def test_bad_keyring_checksum_stops_before_dpkg(make_harness):
    h = make_harness(script(), STUB_SHA_BAD="cuda-keyring")
    run = do(h)
    assert re.fullmatch(r"failed:driver:\d+", run.status) and "sha256" in run.report["error"]
    assert not any("cuda-keyring" in line for line in run.lines("apt-get") + run.lines("dpkg"))


# ---------------------------------------------------------------------------- idempotency and reboots
def test_second_run_installs_nothing_reboots_never_and_exits_0(make_harness):
    h = make_harness(script())
    assert do(h).status == "ready"
    h.reboot()  # GCE: the next boot runs the script again
    run = do(h)
    assert run.rc == 0 and run.status == "ready" and run.report_lines == 1
    assert run.installs() == []
    assert not run.named("reboot") and not run.named("apt-mark") and not run.named("mkfs.ext4")
    assert not run.named("sdk")  # data still staged
    assert not [c for c in run.named("curl") if "-o" in c.args]  # no downloads
    assert {p["status"] for p in run.report["phases"].values()} <= {"verified", "skipped"}
    assert run.named("nvidia-smi")  # re-verified


def test_reboot_needed_path_is_bounded_by_the_persisted_counter(make_harness):
    h = make_harness(script(), STUB_MODPROBE_FAIL="99")
    reboots = []
    for _ in range(4):
        run = do(h)
        reboots.append(len(run.named("reboot")))
        h.reboot()
    assert reboots == [1, 1, 0, 0]
    assert h.path("/var/lib/trainvm/reboots").read_text().strip() == "2"
    assert run.rc != 0 and re.fullmatch(r"failed:driver:\d+", run.status)
    assert "reboot limit (2) is reached" in run.report["error"]


def test_one_reboot_loads_the_module_then_ready_without_reinstalling(make_harness):
    h = make_harness(script(), STUB_MODPROBE_FAIL="1")
    first = do(h)
    assert first.rc == 0 and first.status == "running:driver" and len(first.named("reboot")) == 1
    assert first.report["status"] == "running:driver"
    h.reboot()
    second = do(h)
    assert second.status == "ready" and not second.named("reboot")
    assert not any("nvidia-open" in line for line in second.lines("apt-get"))


def test_headers_gone_from_the_archive_boot_the_image_kernel_metapackage(make_harness, tmp_path):
    """R4: linux-headers-$(uname -r) disappears when Debian's ABI moves on: install the image's
    kernel metapackages, reboot into that kernel, then build; a second miss fails clearly."""
    old, new = "6.1.0-27-cloud-amd64", "6.1.0-56-cloud-amd64"
    h = make_harness(script(os_name="debian-12"), os_name="debian-12", STUB_HEADERS_GONE=old)
    first = do(h)
    assert first.rc == 0 and first.status == "running:driver" and len(first.named("reboot")) == 1, first.output[-3000:]
    apt = first.lines("apt-get")
    assert any(line.endswith("install linux-image-cloud-amd64 linux-headers-cloud-amd64") for line in apt)
    assert not any(f"linux-headers-{old}" in line for line in apt) and not any("nvidia-open=" in line for line in apt)
    h.reboot()
    second = do(h, STUB_KERNEL=new)
    assert second.status == "ready", second.output[-3000:]
    assert any(line.endswith(f"install --no-install-recommends linux-headers-{new} dkms") for line in second.lines("apt-get"))
    # the kernel did not change (e.g. the boot loader kept the old one): a clear failure, no loop
    h2 = sys.modules["trainvm_stubharness"].Harness(tmp_path / "same-kernel", script(os_name="debian-12"),
                                                    os_name="debian-12", STUB_HEADERS_GONE=old)
    do(h2)
    h2.reboot()
    again = do(h2)
    assert again.rc != 0 and re.fullmatch(r"failed:driver:\d+", again.status) and not again.named("reboot")
    assert f"linux-headers-{old} (running kernel) is not in the archive" in again.report["error"]


def test_secret_values_live_in_their_own_file_and_both_files_are_private(make_harness):
    """R7: resolved secret:// values go to their own file; issue 36: /etc/trainvm/env is 0600 too (a value that slips
    past validate is not for every local user to read), owned by the user the startup script runs as (root on the VM,
    this test's user here); trainvm-run jobs get both from systemd, which reads them as root."""
    data = S.minimal_profile(env={"PYTHONHASHSEED": "0", "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
                                  "HF_TOKEN": "secret://gcp/hf-token"})
    h = make_harness(S.render(S.from_dict(data), "gcp").startup_sh)
    run = do(h)
    assert run.status == "ready", run.output[-3000:]
    env, secrets = h.path("/etc/trainvm/env"), h.path("/etc/trainvm/secrets.env")
    assert env.stat().st_mode & 0o777 == 0o600 and secrets.stat().st_mode & 0o777 == 0o600
    assert env.stat().st_uid == secrets.stat().st_uid == os.getuid()
    assert 'PYTHONHASHSEED="0"' in env.read_text() and "s3cr3t" not in env.read_text() and "HF_TOKEN" not in env.read_text()
    assert 'HF_TOKEN="s3cr3t-from-gcp"' in secrets.read_text()
    assert "EnvironmentFile=-/etc/trainvm/secrets.env" in h.path("/usr/local/bin/trainvm-run").read_text()
    assert "secrets.env" in h.path("/etc/profile.d/trainvm-env.sh").read_text()
    assert do(h).installs() == []
    env.chmod(0o644)  # a VM provisioned before: the next boot's run makes it private
    assert do(h).status == "ready" and env.stat().st_mode & 0o777 == 0o600


def test_newer_kernel_pending_reboots_once_before_building(make_harness):
    h = make_harness(script())
    h.path("/var/run/reboot-required.pkgs").write_text("linux-image-5.15.0-1072-gcp\n")
    first = do(h)
    assert len(first.named("reboot")) == 1 and not any("nvidia-open" in line for line in first.lines("apt-get"))
    h.reboot()
    assert do(h).status == "ready"


def test_dpkg_lock_held_waits_then_proceeds(make_harness):
    h = make_harness(script())
    h.hold_dpkg_lock()
    run = do(h, release_lock_after=1.0)
    assert run.rc == 0 and run.status == "ready"
    assert "waited for the dpkg lock" in (h.state / "lock-waits").read_text()
    assert "Waiting for cache lock" in run.output
    assert_apt_rules(run)


def test_transient_copy_errors_are_retried(make_harness):
    h = make_harness(script(), STUB_COPY_FAIL="2")
    run = do(h)
    assert run.status == "ready" and len(run.lines("sdk")) == 6  # the copier, three times (tv_retry)
    assert run.output.count("ConnectionError: 503 Service Unavailable (stub)") == 4  # the copier's, and each retry's cause
    assert len(re.findall(r"attempt \d of 3 failed: .* \(network: trainvm_copy\.py: \S+: ConnectionError: 503 Service Unavailable \(stub\)\)", run.output)) == 2


# ---------------------------------------------------------------------------- data, NVSwitch
def test_nvswitch_shape_raid0_fabric_manager_and_restage_after_stop_start(make_harness):
    h = make_harness(script("bert-pretrain-8xa100"), nvme_disks=4, STUB_GPU_NAME="NVIDIA A100-SXM4-40GB",
                     STUB_GPU_MEM="40960", STUB_GPU_CC="8.0", STUB_GPU_COUNT="8")
    run = do(h)
    assert run.rc == 0, run.output[-3000:]
    apt = run.lines("apt-get")
    assert any(line.endswith(f"install nvidia-fabricmanager-550={DRIVER}-0ubuntu1") for line in apt)
    assert "systemctl start nvidia-fabricmanager.service" in run.lines("systemctl")
    create = [c for c in run.named("mdadm") if c.args[:1] == ["--create"]]
    assert len(create) == 1 and "--level=0" in create[0].args and "--raid-devices=4" in create[0].args
    # mdadm is not in Debian's base system: installed (without its MTA recommends) before RAID0
    order = [c.line for c in run.calls if c.name == "mdadm" or (c.name == "apt-get" and "mdadm" in c.args)]
    assert order[0].endswith("install --no-install-recommends mdadm"), order
    assert all("/dev/nvme0n" in a for a in create[0].args[-4:])  # resolved from the stable by-id names
    assert len(run.named("mkfs.ext4")) == 1
    mount = run.named("mount")[0]
    assert "nofail" in mount.args[1] and mount.args[-1].endswith("/mnt/data")
    assert re.search(r"^UUID=\S+ /mnt/data ext4 defaults,nofail,\S+ 0 2 # trainvm-scratch$", h.path("/etc/fstab").read_text(), re.M)
    rep = run.report
    assert len(rep["gpus"]) == 8 and rep["disk"] == {"path": "/mnt/data", "kind": "nvme", "free_gib": rep["disk"]["free_gib"]}
    assert rep["data"] == [{"dest": "/mnt/data/corpus", "status": "staged"}]
    # stop/start: local NVMe comes back blank; the script re-creates, re-mounts and re-stages
    h.stop_start(["/mnt/data/corpus"])
    again = do(h)
    assert again.status == "ready" and again.installs() == []
    assert len(again.named("mkfs.ext4")) == 1 and [c for c in again.named("mdadm") if c.args[:1] == ["--create"]]
    assert again.lines("sdk") == ["sdk gs client vm-service-account", "sdk gs list example-ml-data bert-corpus/"]
    assert again.report["data"] == [{"dest": "/mnt/data/corpus", "status": "staged"}]
    # a plain reboot keeps the disks: assemble, mount, nothing re-staged
    h.reboot()
    third = do(h)
    assert third.status == "ready" and not third.named("mkfs.ext4") and not third.named("sdk")
    assert [c for c in third.named("mdadm") if c.args[:1] == ["--assemble"]]


def test_profile_asking_for_local_nvme_fails_when_the_shape_has_none(make_harness):
    h = make_harness(script("faster-rcnn"))
    run = do(h)
    assert re.fullmatch(r"failed:data:\d+", run.status) and "local NVMe" in run.report["error"]


def test_cuda_toolkit_cudnn_and_hashed_lock(make_harness, tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("# generated by uv pip compile --generate-hashes\ntorch==2.4.1+cu124 \\\n"
                    "    --hash=sha256:" + "a" * 64 + "\nnumpy==1.26.4 \\\n    --hash=sha256:" + "b" * 64 + "\n")
    lp = S.from_dict(S.minimal_profile(cuda_toolkit=True, cudnn="9.1.0", requirements="requirements.lock"),
                     path=tmp_path / "p.yaml", requirements=lock)
    h = make_harness(S.render(lp, "gcp").startup_sh)
    run = do(h)
    assert run.rc == 0, run.output[-3000:]
    apt = run.lines("apt-get")
    assert any(line.endswith("install --no-install-recommends cuda-toolkit-12-4=12.4.1-1 libcudnn9-cuda-12=9.1.0.70-1 libcudnn9-dev-cuda-12=9.1.0.70-1") for line in apt)
    assert " cuda-toolkit-12-4" in " ".join(run.lines("apt-mark"))
    pip = [line for line in run.lines("uv") if line.startswith("uv pip install")][0]
    assert "--require-hashes -r " in pip and "torch==" not in pip
    assert h.path("/var/lib/trainvm/requirements.lock").read_bytes() == lock.read_bytes()
    assert run.report["cuda_toolkit"] == "12.4.131" and run.report["packages"]["numpy"] == "1.26.4"


def test_changed_profile_on_a_provisioned_vm_is_refused(make_harness):
    h = make_harness(script())
    assert do(h).status == "ready"
    h.script.write_text(script("bert-pretrain-8xa100"))  # GCE metadata edited in place
    run = do(h)
    assert re.fullmatch(r"failed:preflight:\d+", run.status) and "recreate it" in run.report["error"]
    assert run.installs() == []


def test_image_of_another_os_is_refused(make_harness):
    h = make_harness(script(), os_name="ubuntu-24.04")
    run = do(h)
    assert re.fullmatch(r"failed:preflight:\d+", run.status)
    assert "the image is ubuntu 24.04, but this script was rendered for ubuntu-22.04" in run.report["error"]
    assert run.report["os"]["version"] == "24.04" and run.installs() == []
