"""The parts of `make test-os` (lane.py) that run without root, in the fast suite: the prerequisite check
says what is missing and how to get it, and both scenarios' profiles still render to what the lane edits
and asserts on (a profile-schema or template change that breaks the lane fails here, not at the next
manual run), and the fake NVIDIA repository (osrepo.py) is signed for the key its cuda-keyring carries: an
unprivileged real apt reads it through ``signed-by`` and refuses a Packages file that is not the signed one."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "aptsim")]

import bakelane  # noqa: E402
import bootlane  # noqa: E402
import lane  # noqa: E402
import runner  # noqa: E402
import s3lane  # noqa: E402


def test_missing_prerequisites_names_each_with_how_to_get_it():
    assert runner.missing_prerequisites(uid=0, rootfs_cached=False, which=lambda t: f"/usr/bin/{t}", port_free=lambda: True) == []
    busy = runner.missing_prerequisites(uid=0, rootfs_cached=True, which=lambda t: t, port_free=lambda: False)
    assert len(busy) == 1 and "127.0.0.1:443 is in use" in busy[0]
    missing = runner.missing_prerequisites(uid=1000, rootfs_cached=False, which=lambda t: None)
    assert missing[0].startswith("root")
    assert "debootstrap (builds the Debian 12 root filesystem once): apt-get install debootstrap" in missing
    assert "dpkg-scanpackages: apt-get install dpkg-dev" in missing
    assert len(missing) == 2 + len(runner.HOST_TOOLS)
    # once the root filesystem is cached, debootstrap is no longer needed
    cached = runner.missing_prerequisites(uid=0, rootfs_cached=True, which=lambda t: None if t == "debootstrap" else t,
                                          port_free=lambda: True)
    assert cached == []


def test_lane_refuses_an_unknown_scenario(monkeypatch):
    monkeypatch.setenv("TRAINVM_OS_SCENARIOS", "gcp,azure")
    with pytest.raises(SystemExit, match="unknown scenario azure"):
        lane.main()


@pytest.mark.parametrize("nvme", [True, False])
def test_gcp_scenario_renders_with_the_fake_keyring(tmp_path, nvme):
    script = lane.render(tmp_path, "3.11.7", nvme, "ab" * 32).startup_sh
    assert re.search(r"^TV_KEYRING_SHA256=(ab){32}$", script, re.M)
    assert "https://developer.download.nvidia.com/trainvm-data/sample.bin" in script
    assert re.search(r"^TV_NVME=(.*)$", script, re.M).group(1) == ("'required'" if nvme else "'none'")


def test_aws_s3_scenario_renders_the_copy_tool_and_its_lock(tmp_path):
    script = s3lane.render(tmp_path, lane.DRIVER, "3.11.7", "cd" * 32).startup_sh
    assert re.search(r"^TV_KEYRING_SHA256=(cd){32}$", script, re.M)
    assert f"s3://{s3lane.BUCKET}/dataset" in script and "trainvm-provision.service" in script
    pins = s3lane.lock_pins()
    assert pins["boto3"] and all(f"{n}=={v} --hash=sha256:" in script for n, v in pins.items())
    # every object the scenario expects lies under the source prefix; the sibling does not
    assert all(k.startswith("dataset/") for k in s3lane.OBJECTS) and not any(k.startswith("dataset/") for k in s3lane.SIBLING)


def test_repack_puts_the_edited_script_in_a_payload_whose_sha_the_bootstrap_names(tmp_path):
    """The lane's one edit (the fake keyring) lands in the payload the bootstrap fetches: the payload is built again
    with the same manifest metadata and agent, its sha256 is the one the bootstrap checks, and the unedited
    payload's sha256 is refused by ``user_data``."""
    import json

    from provisioner.errors import RenderError
    from provisioner.profile import load_profile
    from provisioner.providers.store import PayloadRef, payload_key
    from provisioner.render import RenderTarget, render_script
    from provisioner.render.payload import unpack

    lane.render(tmp_path, "3.11.7", False, "ab" * 32)  # writes profile.yaml
    original = render_script(load_profile(tmp_path / "profile.yaml"),
                             RenderTarget("gcp", "n1-standard-8", "T4", 1, lane.REGION, "us-central1-a"))
    edited = bootlane.repack(original, "ab" * 32)
    files = unpack(edited.payload.data)
    assert files["startup.sh"].decode() == edited.startup_sh != original.startup_sh
    assert edited.startup_sh == bootlane.edit_keyring(original.startup_sh, "ab" * 32)
    assert hashlib.sha256(edited.payload.data).hexdigest() == edited.payload.sha256 != original.payload.sha256
    old_doc, new_doc = (json.loads(p.files["manifest.json"]) for p in (original.payload, edited.payload))
    assert {k: v for k, v in old_doc.items() if k != "files"} == {k: v for k, v in new_doc.items() if k != "files"}
    assert new_doc["files"]["startup.sh"] == hashlib.sha256(edited.startup_sh.encode()).hexdigest()
    assert {k for k in files if k.startswith("agent/")} == {k for k in original.payload.files if k.startswith("agent/")}

    def ref(sha: str) -> PayloadRef:
        return PayloadRef(cloud="gcp", region=lane.REGION, store="b", key=payload_key(sha), sha256=sha, size=1,
                          url=f"http://127.0.0.1:9/storage/v1/b/b/o/payloads%2F{sha}.tar.gz?alt=media")

    boot = edited.user_data(ref(edited.payload.sha256)).text
    assert re.search(rf"^TV_SHA256='?{edited.payload.sha256}'?$", boot, re.M) and "http://127.0.0.1:9/storage/v1/b/b/o/" in boot
    with pytest.raises(RenderError):
        edited.user_data(ref(original.payload.sha256))
    with pytest.raises(AssertionError, match="not one line"):
        bootlane.edit_keyring("echo no keyring here\n", "ab" * 32)


def test_bootstrap_lines_are_read_from_the_run_output():
    sha = "0" * 64
    out = (f"trainvm bootstrap: payload {sha} fetched (149167 bytes) and verified\n"
           "[trainvm] phase preflight\nTRAINVM_STATUS=ready\n")
    assert bootlane.fetched_and_verified(out, sha) and not bootlane.nothing_fetched(out, sha)
    assert not bootlane.fetched_and_verified(out, "1" * 64)
    again = f"trainvm bootstrap: payload {sha} already on disk: nothing fetched\n"
    assert bootlane.nothing_fetched(again, sha) and not bootlane.fetched_and_verified(again, sha)


def test_installed_traces_name_what_a_refused_payload_must_not_leave(tmp_path):
    (tmp_path / "var/lib/trainvm/payload").mkdir(parents=True)  # the bootstrap makes it before fetching: allowed
    assert bootlane.installed_traces(tmp_path) == []
    (tmp_path / "var/lib/trainvm/payload/x.tar.gz.part").write_text("")
    (tmp_path / "var/lib/trainvm/status").write_text("")
    (tmp_path / "opt/trainvm").mkdir(parents=True)
    (tmp_path / "opt/trainvm/current").symlink_to("/opt/trainvm/payload/x")  # dangling still counts
    assert bootlane.installed_traces(tmp_path) == ["opt/trainvm/current", "var/lib/trainvm/payload/x.tar.gz.part",
                                                   "var/lib/trainvm/status"]


def test_report_differences_compare_field_by_field_and_set_apart_what_differs_by_nature():
    vm = {"schema": 1, "source": "vm", "status": "ready", "driver": "550.127.05", "gpus": [{"name": "Tesla T4"}],
          "disk": {"path": "/", "kind": "ssd", "free_gib": 10.5}, "phases": {"driver": {"status": "ok", "seconds": 3.0}},
          "profile_hash": "ab", "packages": {"six": "1.16.0"}, "error": None}
    local = {**vm, "source": "local", "disk": {**vm["disk"], "free_gib": 10.4}, "phases": {}, "profile_hash": None}
    same, nature, wrong = bootlane.report_differences(vm, local)
    assert wrong == [] and "driver" in same and "packages.six" in same and "disk.path" in same and "error" in same
    assert nature == ["disk.free_gib", "phases", "phases.driver.seconds", "phases.driver.status", "profile_hash", "source"]
    drifted = {**local, "packages": {"six": "1.17.0"}, "gpus": [], "cpu": {"count": 8}}
    _, _, wrong = bootlane.report_differences(vm, drifted)
    assert wrong == ["cpu.count: vm '<absent>', probe 8", "gpus: vm [{'name': 'Tesla T4'}], probe []",
                     "packages.six: vm '1.16.0', probe '1.17.0'"]


@pytest.fixture(scope="module")
def built_repo(tmp_path_factory):
    import osrepo

    www = tmp_path_factory.mktemp("osrepo") / "www"
    repo = osrepo.build(www, [lane.DRIVER], lambda msg: None)
    return repo, www / osrepo.REPO_PATH, www.parent / "gnupg"


def _apt(tmp: Path, repo_dir: Path, keyring: Path, *args: str, tool: str = "apt-get") -> subprocess.CompletedProcess[str]:
    """An unprivileged apt of its own reading the built repository as the VM does: signed-by its keyring."""
    for d in ("etc/apt.conf.d", "etc/preferences.d", "state/lists/partial", "cache/archives/partial", "log"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    (tmp / "etc/sources.list").write_text(f"deb [signed-by={keyring}] file:{repo_dir}/ /\n")
    (tmp / "state/status").touch()
    conf = {"Dir::Etc": tmp / "etc", "Dir::State": tmp / "state", "Dir::State::status": tmp / "state/status",
            "Dir::Cache": tmp / "cache", "Dir::Log": tmp / "log", "Debug::NoLocking": "true", "APT::Architecture": "amd64",
            "APT::Sandbox::User": "root" if os.geteuid() == 0 else "", "Acquire::Languages": "none"}
    (tmp / "apt.conf").write_text("".join(f'{k} "{v}";\n' for k, v in conf.items() if v != ""))
    env = {**os.environ, "APT_CONFIG": str(tmp / "apt.conf"), "LC_ALL": "C"}
    return subprocess.run([tool, *args], env=env, capture_output=True, text=True, timeout=120)


def test_fake_nvidia_repository_is_signed_for_the_key_its_cuda_keyring_carries(built_repo, tmp_path):
    repo, repo_dir, _ = built_repo
    keyring_deb = repo_dir / "cuda-keyring_1.1-1_all.deb"
    assert hashlib.sha256(keyring_deb.read_bytes()).hexdigest() == repo.keyring_sha256
    subprocess.run(["dpkg-deb", "-x", str(keyring_deb), str(tmp_path / "kr")], check=True)
    keyring = tmp_path / "kr/usr/share/keyrings/cuda-archive-keyring.gpg"
    assert "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /" in \
        (tmp_path / "kr/etc/apt/sources.list.d/cuda-debian12-x86_64.list").read_text()
    listed = set(re.findall(r"^Package: (\S+)$", (repo_dir / "Packages").read_text(), re.M))
    assert listed == repo.names | {"cuda-keyring"} and len(repo.names) > 50
    ok = _apt(tmp_path / "apt", repo_dir, keyring, "update")
    assert ok.returncode == 0 and "NO_PUBKEY" not in ok.stderr, ok.stderr
    madison = _apt(tmp_path / "apt", repo_dir, keyring, "madison", "nvidia-open", tool="apt-cache")
    assert f"nvidia-open | {lane.DRIVER}-1 | file:{repo_dir}" in madison.stdout, madison.stdout + madison.stderr
    # a Packages file that is not the signed one is refused (the check is live)
    tampered = tmp_path / "tampered"
    shutil.copytree(repo_dir, tampered, ignore=shutil.ignore_patterns("*.deb"))
    with open(tampered / "Packages", "a") as fh:
        fh.write("\nPackage: evil\nVersion: 1\nArchitecture: all\n")
    bad = _apt(tmp_path / "apt2", tampered, keyring, "update")
    assert "Hash Sum mismatch" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
    gone = _apt(tmp_path / "apt2", tampered, keyring, "madison", "evil", tool="apt-cache")
    assert "evil" not in gone.stdout


@pytest.mark.parametrize(("gpu", "seen", "model"), [("T4", ("Tesla T4", 15360, "7.5"), "T4"),
                                                    ("V100", ("Tesla V100-SXM2-16GB", 16384, "7.0"), "V100")])
def test_nvidia_smi_stub_answers_what_the_agent_asks(tmp_path, gpu, seen, model):
    """The lane's nvidia-smi (osroot.STUBS, for the chroot lane's T4 and the module lane's V100) parsed by the agent's
    own parsers: the CSV query in the agent's field order and ``-q -x`` (a stub that answered only an older field order
    left the VM without GPUs: the gate rebooted); the name is the model the profile asks for."""
    import osroot

    from provisioner.agent.gpu import SMI_CSV_ARGS, canonical_gpu_name, parse_smi_csv, parse_smi_xml

    (tmp_path / "nvidia-smi").write_text(osroot.stub_text(osroot.STUBS["usr/local/bin/nvidia-smi"], lane.DRIVER, gpu))
    (tmp_path / "dpkg-query").write_text("#!/bin/bash\necho 'install ok installed'\n")
    (tmp_path / "dpkg-query").chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}

    def smi(*args: str) -> str:
        return subprocess.run(["bash", str(tmp_path / "nvidia-smi"), *args], env=env, capture_output=True, text=True,
                              check=True).stdout

    gpus, driver = parse_smi_csv(smi(*SMI_CSV_ARGS))
    assert [(g.name, g.memory_mib, g.compute_capability) for g in gpus] == [seen]
    assert canonical_gpu_name(seen[0], seen[1]) == model
    assert driver == lane.DRIVER
    xml_gpus, xml_driver, cuda = parse_smi_xml(smi("-q", "-x"))
    assert (xml_gpus, xml_driver, cuda) == (gpus, lane.DRIVER, "12.4")
    assert smi("--query-gpu=utilization.gpu", "--format=csv,noheader,nounits") == "0\n"


def test_building_the_repository_leaves_no_gpg_agent(built_repo):
    """osrepo.build signs with a throwaway GNUPGHOME; the gpg-agent gpg starts for it is stopped at the end (it
    used to outlive every lane run). Asked without autostart, no agent answers on that home's socket."""
    _, _, gnupg = built_repo
    assert gnupg.is_dir()
    env = {**os.environ, "GNUPGHOME": str(gnupg)}
    asked = subprocess.run(["gpg-connect-agent", "--no-autostart", "/bye"], env=env, capture_output=True, text=True, timeout=30)
    assert "no gpg-agent running" in asked.stderr, "a gpg-agent still runs for the lane's GNUPGHOME: " + asked.stdout + asked.stderr


def test_python_stand_in_copies_the_interpreter_and_its_stdlib_never_the_rest_of_the_prefix(tmp_path):
    """On a Debian host without pyenv, sys.base_prefix is /usr: the stand-in for uv's Python download takes
    bin/pythonX.Y, libpythonX.Y and lib/pythonX.Y (no site-/dist-packages), nothing else of the prefix."""
    import osroot

    usr = tmp_path / "usr"
    for rel in ("bin/python3.11", "bin/gcc", "lib/python3.11/os.py", "lib/python3.11/lib-dynload/_ssl.so",
                "lib/python3.11/dist-packages/apt/__init__.py", "lib/python3.11/test/test_os.py",
                "lib/x86_64-linux-gnu/libc.so.6", "share/doc/big/README", "lib/libpython3.11.so.1.0", "include/python3.11/Python.h"):
        (usr / rel).parent.mkdir(parents=True, exist_ok=True)
        (usr / rel).write_text(rel)
    copied = osroot.stage_python(usr, tmp_path / "stage/python", "3.11.7")
    files = sorted(str(p.relative_to(tmp_path / "stage/python")) for p in (tmp_path / "stage/python").rglob("*")
                   if p.is_file() or p.is_symlink())
    assert files == ["bin/python", "bin/python3", "bin/python3.11", "lib/libpython3.11.so.1.0",
                     "lib/python3.11/lib-dynload/_ssl.so", "lib/python3.11/os.py"], files
    assert "lib/python3.11" in copied
    with pytest.raises(SystemExit, match="no CPython 3.12"):
        osroot.stage_python(usr, tmp_path / "other", "3.12.1")


@pytest.mark.parametrize("image_mode,status", [("bake", "baked"), ("baked", "ready")])
def test_bake_scenario_renders_both_image_modes_with_the_fake_keyring(tmp_path, image_mode, status):
    script = lane.render(tmp_path, "3.11.7", False, "ef" * 32, image_mode).startup_sh
    assert re.search(r"^TV_KEYRING_SHA256=(ef){32}$", script, re.M)
    assert re.search(rf"^TV_IMAGE_MODE={image_mode}$", script, re.M) and f"tv_finish {status}" in script


CLEAN_IMAGE = {
    "etc/machine-id": ("file", 0), "etc/ssh": ("dir", 0), "etc/ssh/sshd_config": ("file", 3200),
    "etc/trainvm": ("dir", 0), "var/lib/trainvm": ("dir", 0), "var/lib/trainvm/done.driver": ("file", 0),
    "var/log/trainvm/startup.log": ("file", 0), "opt/trainvm/venv/bin/python": ("link", 0),
    "mnt/data": ("dir", 0), "var/lib/cloud": ("dir", 0), "root/.profile": ("file", 161),
}


def test_archive_findings_pass_a_clean_image():
    assert bakelane.archive_findings(CLEAN_IMAGE, ["/mnt/data/sample"]) == []


@pytest.mark.parametrize("path,kind,size,says", [
    ("etc/machine-id", "file", 33, "must be empty"),
    ("var/lib/dbus/machine-id", "file", 33, "a machine id"),
    ("var/lib/systemd/random-seed", "file", 512, "random seed"),
    ("var/lib/systemd/credential.secret", "file", 4096, "credential key"),
    ("etc/ssh/ssh_host_ed25519_key", "file", 411, "SSH host key"),
    ("etc/trainvm/secrets.env", "file", 40, "per-VM environment"),
    ("etc/trainvm/env", "file", 40, "per-VM environment"),
    ("var/lib/trainvm/profile-hash", "file", 65, "per-VM state"),
    ("var/lib/trainvm/phases/driver", "file", 8, "per-VM state"),
    ("opt/trainvm/payload/ab/startup.sh", "file", 9000, "payload"),
    ("opt/trainvm/current", "link", 0, "payload"),
    ("usr/local/sbin/trainvm-provision", "file", 9000, "payload"),
    ("mnt/data/sample/sample.bin", "file", 1 << 20, "data"),
    ("root/.bash_history", "file", 10, "shell history"),
    ("home/debian/.docker/config.json", "file", 90, "registry credentials"),
    ("var/lib/cloud/instance", "link", 0, "cloud-init"),
    ("var/cache/apt/archives/dkms_3.0.10-8_all.deb", "file", 70000, "downloaded package"),
    ("var/log/trainvm/startup.log", "file", 5000, "trainvm's log"),
])
def test_archive_findings_name_each_thing_a_baked_image_must_not_hold(path, kind, size, says):
    found = bakelane.archive_findings({**CLEAN_IMAGE, path: (kind, size)}, ["/mnt/data/sample"])
    assert len(found) == 1 and found[0].startswith(path + ":") and says in found[0]


def test_the_baked_boot_proxy_bypasses_only_the_loopback_store_metadata_and_nvidia_host():
    env = dict(e.split("=", 1) for e in bakelane.proxy_env("http://127.0.0.1:9"))
    assert env["https_proxy"] == env["HTTPS_PROXY"] == env["http_proxy"] == "http://127.0.0.1:9"
    assert set(env["no_proxy"].split(",")) == {"127.0.0.1", "localhost", "metadata.google.internal",
                                               "developer.download.nvidia.com"}
