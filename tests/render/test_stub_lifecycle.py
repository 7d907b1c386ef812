"""The lifecycle programs the rendered script installs, run under the stub harness: the idle
watchdog (what counts as busy, the idle clock keyed to the boot), ``trainvm-lifecycle`` per cloud
(what idle and max-run call: Azure deallocates/deletes through ARM with an IMDS token, AWS calls
EC2 StopInstances/TerminateInstances through the helper's boto3 program, GCE stops from the guest or deletes through the Compute API) and the max-run
timer on clouds that do not enforce max_run_hours themselves (issue 10)."""

from __future__ import annotations

import dataclasses
import functools
import re
import shutil
import subprocess

import pytest
import trainvm_render_support as S

from provisioner.profile.loader import profile_hash

WD = "/usr/local/sbin/trainvm-idle-watchdog"
LC = "/usr/local/sbin/trainvm-lifecycle"
AZ_VM = "/subscriptions/sub-1/resourceGroups/trainvm-vm/providers/Microsoft.Compute/virtualMachines/vm"


@functools.cache
def script(cloud: str, https_data: bool = False, **lifecycle) -> str:
    """The golden profile's script for ``cloud``, its data on that cloud's own storage (AWS: s3://, so the s3 copy
    tool's boto3 is installed), or with ``https_data`` on plain https:// (no copy tool; on AWS the s3 tool's venv
    only when the VM calls an AWS API: a mixed lifecycle, secret://aws/)."""
    lp = S.data_native_to(S.loaded(S.GOLDEN_PROFILE), cloud)
    if https_data:
        items = [d.model_copy(update={"source": "https://data.example.com/" + d.source.split("://", 1)[1]})
                 for d in lp.profile.data]
        lp = dataclasses.replace(lp, profile=lp.profile.model_copy(update={"data": items}))
    lc = lp.profile.lifecycle.model_copy(update=lifecycle)
    profile = lp.profile.model_copy(update={"lifecycle": lc})
    return S.render(dataclasses.replace(lp, profile=profile, hash=profile_hash(profile)), cloud).startup_sh


def provisioned(make_harness, cloud: str, https_data: bool = False, **lifecycle):
    h = make_harness(script(cloud, https_data, **lifecycle), cloud=cloud)
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    return h


def calls(h) -> str:
    log = h.state / "calls.log"
    return log.read_text() if log.exists() else ""


def check(h, **knobs):
    (h.state / "calls.log").unlink(missing_ok=True)
    out = h.run_file(h.path(WD), **knobs)
    return out, calls(h)


def age_idle_clock(h, minutes: int) -> None:
    f = h.path("/run/trainvm/idle-since")
    boot, since = f.read_text().split()
    f.write_text(f"{boot} {int(since) - minutes * 60}\n")


def go_idle(h, minutes: int = 61):
    """Start the idle clock, move it back ``minutes``, check again."""
    out, log = check(h)
    assert out.returncode == 0 and h.path("/run/trainvm/idle-since").exists(), out.stdout
    assert "trainvm-lifecycle" not in out.stdout and "poweroff" not in log
    age_idle_clock(h, minutes)
    return check(h)


# ---------------------------------------------------------------------------- busy signals
BUSY = {
    "gpu utilisation": ({"STUB_GPU_UTIL": "87"}, None),
    "login session": ({"STUB_WHO": "alice pts/0 2026-11-22 10:00 (203.0.113.7)"}, None),
    "ssh connection": ({"STUB_SS": "0 0 10.0.0.4:22 203.0.113.7:50522"}, None),
    "trainvm job": ({"STUB_ACTIVE_JOBS": "trainvm-job-20261122-100000.service"}, None),
    "tmux session": ({}, ("tmux: server", ())),
    "screen session": ({}, ("SCREEN", ())),
    "process on the GPU": ({}, ("python", ("/dev/nvidia0", "/dev/nvidiactl"))),
    "cpu load": ({}, "loadavg"),
}


@pytest.mark.parametrize("what", sorted(BUSY))
def test_busy_resets_the_idle_clock_and_keeps_the_vm(make_harness, what):
    h = provisioned(make_harness, "azure")
    check(h)
    age_idle_clock(h, 61)  # the idle clock has run out...
    knobs, machine = BUSY[what]  # ...but now the VM is busy
    if machine == "loadavg":
        h.path("/proc/loadavg").write_text("1.45 1.20 0.90 2/311 4242\n")
    elif machine:
        h.process(4242, machine[0], machine[1])
    out, log = check(h, **knobs)
    assert out.returncode == 0, out.stdout
    assert "deallocate" not in log and "poweroff" not in log, (what, log)
    assert not h.path("/run/trainvm/idle-since").exists()


def test_idle_signals_are_not_busy(make_harness):
    """nvidia-persistenced holds /dev/nvidia* on every GPU VM; a low load average and idle GPUs are idle."""
    h = provisioned(make_harness, "azure")
    h.process(900, "nvidia-persiste", ("/dev/nvidia0", "/dev/nvidiactl"))
    h.process(901, "bash", ("/dev/null",))
    h.path("/proc/loadavg").write_text("0.31 0.40 0.35 1/290 4242\n")
    out, log = go_idle(h)
    assert "idle for 61 minutes" in out.stdout and f"{AZ_VM}/deallocate" in log


# ---------------------------------------------------------------------------- the idle clock
def test_stale_idle_clock_from_a_previous_boot_does_not_shut_down(make_harness):
    """issue 10: after stop/start a leftover idle-since powered the VM off at the first check."""
    h = provisioned(make_harness, "azure")
    check(h)
    age_idle_clock(h, 600)  # idle for hours before the stop...
    stale = h.path("/run/trainvm/idle-since").read_text()
    h.stop_start()
    h.path("/run/trainvm").mkdir(parents=True)  # even if /run survived, the boot id differs
    h.path("/run/trainvm/idle-since").write_text(stale)
    h.path("/var/lib/trainvm/idle-since").write_text("1000000000\n")  # where older watchdogs kept it
    out, log = check(h)
    assert out.returncode == 0 and "trainvm-lifecycle" not in out.stdout
    assert "deallocate" not in log and "poweroff" not in log
    boot, since = h.path("/run/trainvm/idle-since").read_text().split()
    assert boot == h.path("/proc/sys/kernel/random/boot_id").read_text().strip() and boot not in stale


def test_idle_clock_survives_checks_and_acts_once_past_the_limit(make_harness):
    h = provisioned(make_harness, "azure", idle_shutdown_minutes=30)
    check(h)
    age_idle_clock(h, 29)
    out, log = check(h)
    assert "deallocate" not in log
    age_idle_clock(h, 2)
    out, log = check(h)
    assert "idle for 31 minutes (limit 30): stop" in out.stdout and "deallocate" in log


def span(value: str) -> int:
    """A systemd time span of this unit (systemd.time(7)): "1min", "1s", "5min" -> seconds."""
    n, unit_ = re.fullmatch(r"(\d+)\s*(s|sec|min)", value).groups()
    return int(n) * (60 if unit_ == "min" else 1)


def test_idle_stop_comes_at_the_limit_not_a_check_later(make_harness):
    """issue 38: trainvm-idle.timer had no AccuracySec, so systemd's default (1min, systemd.timer(5)) let each check
    come up to 2 minutes after the last; under QEMU the VM stopped at "idle for 6 minutes (limit 5)". Every check here
    comes as late as the installed timer allows: the one that acts is at most 1 s per minute of the limit late."""
    h = provisioned(make_harness, "azure", idle_shutdown_minutes=5)
    timer = dict(line.split("=", 1) for line in unit(h, "trainvm-idle.timer").splitlines() if "=" in line)
    step = span(timer["OnUnitActiveSec"]) + span(timer.get("AccuracySec", "1min"))
    out, log = check(h)  # the first check that finds the VM idle starts the clock
    elapsed = 0
    while "deallocate" not in log:
        assert elapsed < 3600, out.stdout
        f = h.path("/run/trainvm/idle-since")
        boot, since = f.read_text().split()
        f.write_text(f"{boot} {int(since) - step}\n")
        elapsed += step
        out, log = check(h)
    assert 300 <= elapsed <= 305, (step, elapsed)
    assert "idle for 5 minutes (limit 5): stop" in out.stdout


STRACE = shutil.which("strace")


def check_forks(h) -> int:
    """Processes one idle check starts (clone/fork/vfork seen by strace -f), with the same world as check()."""
    log = h.tmp / "strace.log"
    out = subprocess.run([STRACE, "-f", "-qq", "-e", "trace=clone,clone3,fork,vfork", "-o", str(log), "bash", str(h.path(WD))],
                         env=h.env(), cwd=h.cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return len(re.findall(r"^\d+\s+(?:clone3?|v?fork)\(", log.read_text(), re.M))


def busy_job(h, pid: int, files: int, *gpu: str) -> None:
    h.process(pid, "python", tuple(f"/data/shard-{i:05d}.bin" for i in range(files)) + gpu)


@pytest.mark.skipif(not STRACE, reason="strace counts the processes a check starts")
def test_an_idle_check_starts_as_many_processes_whatever_the_jobs_open_files(make_harness):
    """issue 38: holds_gpu started a subshell and a readlink per open file descriptor (10-11 s of CPU per check under
    QEMU TCG, growing with the job's files), the tmux/screen look a cat per process. Now: one find, the shell's read."""
    h = provisioned(make_harness, "azure")
    h.process(900, "nvidia-persiste", ("/dev/nvidia0", "/dev/nvidiactl"))
    busy_job(h, 4242, 10)
    few = check_forks(h)
    busy_job(h, 4243, 4000)
    for pid in range(5000, 5150):
        busy_job(h, pid, 20)
    many = check_forks(h)
    assert many == few <= 40, (few, many)  # 32 here: the check and the stubs it runs (nvidia-smi, who, ss, ...)
    # and a holder among thousands of files is still found (its descriptor is the last one)
    check(h)
    age_idle_clock(h, 61)
    busy_job(h, 6000, 4000, "/dev/nvidia-uvm")
    out, log = check(h)
    assert "deallocate" not in log and not h.path("/run/trainvm/idle-since").exists(), out.stdout


# ---------------------------------------------------------------------------- per cloud: idle
def curl_calls(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("curl\t")]


@pytest.mark.parametrize("on_idle, method, url", [
    ("stop", "POST", f"https://management.azure.com{AZ_VM}/deallocate?api-version=2024-07-01"),
    ("delete", "DELETE", "https://management.azure.com/subscriptions/sub-1/resourceGroups/trainvm-vm?api-version=2021-04-01"),
])
def test_azure_idle_calls_arm_with_the_managed_identity_never_poweroff(make_harness, on_idle, method, url):
    """issue 10: `systemctl poweroff` leaves an Azure VM Stopped and billed; deallocate through ARM."""
    h = provisioned(make_harness, "azure", on_idle=on_idle)
    out, log = go_idle(h)
    assert out.returncode == 0, out.stdout
    assert "poweroff" not in log
    curls = curl_calls(log)
    imds = [c for c in curls if "169.254.169.254/metadata" in c]
    assert any("identity/oauth2/token" in c and "resource=https%3A%2F%2Fmanagement.azure.com%2F" in c and "Metadata:true" in c
               for c in imds), curls
    (api,) = [c.split("\t") for c in curls if c.split("\t")[-1].startswith("https://management.azure.com/")]
    assert api[api.index("-X") + 1] == method and api[-1] == url and "Authorization: Bearer stub-token" in api
    assert "stub-token" not in out.stdout  # the token is never printed


def run_lc(h, *args, **knobs):
    (h.state / "calls.log").unlink(missing_ok=True)
    r = subprocess.run(["bash", str(h.path(LC)), *args], env=h.env(**knobs), capture_output=True, text=True)
    return r, calls(h)


#: the data of the AWS profile: s3:// (the s3 tool is installed for it too) or https:// (installed for the mixed
#: lifecycle's EC2 call alone): either way trainvm-lifecycle calls EC2 through that venv's boto3
EC2_PATHS = pytest.mark.parametrize("https_data", [False, True], ids=["s3-data", "https-data"])


@EC2_PATHS
@pytest.mark.parametrize("on_idle, on_max_run, api", [("delete", "stop", "TerminateInstances"),
                                                      ("stop", "delete", "TerminateInstances")])
def test_aws_mixed_lifecycle_deletes_through_ec2_never_poweroff(make_harness, on_idle, on_max_run, api, https_data):
    """A mixed stop/delete: the guest shutdown is set to stop, so the `delete` is trainvm-lifecycle's own EC2
    TerminateInstances: `trainvm_helper.py ec2 terminate`, boto3 of the s3 tool's venv (installed for it even with
    https:// data; the fake records the call), with the instance role's credentials that botocore reads from IMDSv2
    (the fake EC2 refuses any other); no AWS CLI, which AWS's images do not have, and no curl signing."""
    h = provisioned(make_harness, "aws", https_data, on_idle=on_idle, on_max_run=on_max_run, max_run_hours=2)
    assert "SHUTDOWN_DOES=stop" in h.path("/etc/trainvm/watchdog.conf").read_text()
    assert h.path("/opt/trainvm/datatools/s3/bin/python").exists()
    if on_idle == "delete":
        out, log = go_idle(h)
    else:
        out, log = run_lc(h, on_max_run, "max-run")
    assert out.returncode == 0, out.stdout
    lines = log.splitlines()
    assert f"ec2\t{api}\ti-0123456789abcdef0" in lines
    assert "poweroff" not in log and "aws\t" not in log and "--aws-sigv4" not in log
    assert "sdk\ts3\tclient\tec2\tkey=iam-role" in lines
    token = lines.index("http\tPUT\thttp://169.254.169.254/latest/api/token")  # IMDSv2, before the call
    assert token < lines.index(f"ec2\t{api}\ti-0123456789abcdef0")
    assert "http\tGET\thttp://169.254.169.254/latest/meta-data/iam/security-credentials/trainvm-role" in lines
    assert f"EC2 {api}: shutting-down" in out.stdout
    # the other action, stop, is what the guest shutdown does exactly: no API call
    r, log = run_lc(h, "stop", "idle" if on_idle == "stop" else "max-run")
    assert r.returncode == 0 and "systemctl\tpoweroff" in log and "ec2\t" not in log
    assert "InstanceInitiatedShutdownBehavior does stop" in r.stdout


def test_aws_mixed_lifecycle_without_the_sdk_venv_says_so_and_falls_back_to_the_stop_shutdown(make_harness):
    """The venv gone (removed by hand): the EC2 call is a clear failure (no other way to call EC2), and the `delete`
    ends in the guest shutdown set to stop, which loses nothing that was not asked."""
    import shutil

    h = provisioned(make_harness, "aws", True, on_idle="delete", on_max_run="stop", max_run_hours=2)
    shutil.rmtree(h.path("/opt/trainvm/datatools/s3"))
    r, log = run_lc(h, "delete", "idle")
    assert r.returncode == 0 and "systemctl\tpoweroff" in log and "ec2\t" not in log
    assert "EC2 TerminateInstances failed: the AWS SDK (boto3 in /opt/trainvm/datatools/s3) is not installed" in r.stderr
    assert "the EC2 call failed" in r.stdout and "InstanceInitiatedShutdownBehavior does stop" in r.stdout


@pytest.mark.parametrize("action", ["stop", "delete"])
def test_aws_uniform_lifecycle_is_the_guest_shutdown_set_to_that_action(make_harness, action):
    """Every action in use the same: the create request set InstanceInitiatedShutdownBehavior to it (stop: the
    instance stops, terminate: it terminates), so a shutdown from the guest is exactly that action, with no EC2 call."""
    h = provisioned(make_harness, "aws", on_idle=action, on_max_run=action, max_run_hours=2)
    assert f"SHUTDOWN_DOES={action}" in h.path("/etc/trainvm/watchdog.conf").read_text()
    out, log = go_idle(h)
    assert out.returncode == 0 and "systemctl\tpoweroff" in log and "ec2\t" not in log, out.stdout
    assert f"InstanceInitiatedShutdownBehavior does {action}" in out.stdout


@EC2_PATHS
@pytest.mark.parametrize("on_idle, on_max_run", [("delete", "stop"), ("stop", "delete")])
def test_aws_failed_ec2_call_falls_back_to_the_stop_shutdown(make_harness, on_idle, on_max_run, https_data):
    """When the EC2 call fails (here: refused, UnauthorizedOperation, which is not tried again) the `delete` of a
    mixed setting ends in the guest shutdown, set to stop (lifecycle.guest_shutdown_action): compute billing ends,
    nothing is deleted. (Before the shutdown behaviour followed every action in use, the max-run stop of
    on_idle delete + on_max_run stop never shut down, and the VM kept billing past max_run_hours.)"""
    h = provisioned(make_harness, "aws", https_data, on_idle=on_idle, on_max_run=on_max_run, max_run_hours=2)
    r = h.run_file(h.path(LC), STUB_AWS_EC2_FAIL="1")
    assert r.returncode == 2 and "poweroff" not in calls(h)  # no action given: nothing happens
    r, log = run_lc(h, "delete", "idle" if on_idle == "delete" else "max-run", STUB_AWS_EC2_FAIL="1")
    assert r.returncode == 0 and "systemctl\tpoweroff" in log, (r.stdout, r.stderr)
    assert log.count("ec2\tTerminateInstances\t") == 1  # refused: not tried again
    assert "UnauthorizedOperation" in r.stderr
    assert "the EC2 call failed" in r.stdout and "InstanceInitiatedShutdownBehavior does stop" in r.stdout
    r, log = run_lc(h, "stop", "max-run", STUB_AWS_EC2_FAIL="1")
    assert r.returncode == 0 and "systemctl\tpoweroff" in log and "ec2\t" not in log


@EC2_PATHS
def test_aws_a_shutdown_never_deletes_what_should_stop(make_harness, https_data):
    """All actions delete: the shutdown behaviour is terminate, so a `stop` (only by hand here) is never a shutdown.
    Without s3:// data this VM calls no AWS API, has no SDK venv, and the helper's EC2 call fails at once (the venv
    is missing), so it exits non-zero and nothing happens; with it, boto3 asks EC2 for StopInstances, which the
    instance profile does not allow (only the actions in use: aws_request.role_policy), and when EC2 refuses,
    nothing happens either."""
    h = provisioned(make_harness, "aws", https_data, on_idle="delete", on_max_run="delete", max_run_hours=2)
    assert h.path("/opt/trainvm/datatools/s3").exists() is not https_data
    r, log = run_lc(h, "stop", "manual", STUB_AWS_EC2_FAIL="1")
    assert r.returncode != 0 and "poweroff" not in log
    assert ("ec2\t" in log) is not https_data


@pytest.mark.parametrize("on_idle", ["stop", "delete"])
def test_gce_idle(make_harness, on_idle):
    """GCE: a guest shutdown leaves the instance TERMINATED (stopped, compute not billed); delete goes
    through instances.delete with the VM's own token."""
    h = provisioned(make_harness, "gcp", on_idle=on_idle)
    out, log = go_idle(h)
    assert out.returncode == 0, out.stdout
    if on_idle == "stop":
        assert "systemctl\tpoweroff" in log and "compute.googleapis.com" not in log
    else:
        (api,) = [c.split("\t") for c in curl_calls(log) if "compute.googleapis.com" in c]
        assert api[-1] == "https://compute.googleapis.com/compute/v1/projects/test-proj/zones/us-central1-a/instances/trainvm-vm"
        assert api[api.index("-X") + 1] == "DELETE" and "poweroff" not in log


def test_failed_call_keeps_the_clock_and_retries(make_harness):
    h = provisioned(make_harness, "azure")
    check(h)
    age_idle_clock(h, 61)
    out, log = check(h, STUB_CURL_FAIL="management.azure.com")
    assert out.returncode != 0 and "poweroff" not in log
    out, log = check(h)
    assert out.returncode == 0 and "deallocate" in log


# ---------------------------------------------------------------------------- max run
def unit(h, name: str) -> str:
    return h.path(f"/etc/systemd/system/{name}").read_text()


@pytest.mark.parametrize("cloud", ["azure", "aws"])
@pytest.mark.parametrize("on_max_run", ["stop", "delete"])
def test_max_run_timer_where_the_cloud_does_not_enforce_it(make_harness, cloud, on_max_run):
    h = provisioned(make_harness, cloud, max_run_hours=2.5, on_max_run=on_max_run)
    assert "OnBootSec=9000s" in unit(h, "trainvm-max-run.timer")
    service = unit(h, "trainvm-max-run.service")
    m = re.search(r"^ExecStart=(\S+) (.+)$", service, re.M)
    assert m and m.group(1) == LC and m.group(2) == f"{on_max_run} max-run" and "Restart=on-failure" in service
    run_log = calls(h)
    assert re.search(r"systemctl\tenable\t--now\ttrainvm-idle.timer\ttrainvm-max-run.timer", run_log), run_log
    (h.state / "calls.log").unlink(missing_ok=True)
    r = subprocess.run(["bash", str(h.path(LC)), *m.group(2).split()], env=h.env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    log = calls(h)
    if cloud == "azure":
        assert "poweroff" not in log
        assert ("/deallocate?" in log) == (on_max_run == "stop") and ("resourceGroups/trainvm-vm?api-version" in log) == (on_max_run == "delete")
    else:
        # on_idle is stop: max-run stop is the guest shutdown (set to stop); max-run delete calls EC2 TerminateInstances
        assert ("ec2\tTerminateInstances\t" in log) == (on_max_run == "delete") and "ec2\tStopInstances" not in log
        assert ("systemctl\tpoweroff" in log) == (on_max_run == "stop")


def test_gce_enforces_max_run_itself_no_timer(make_harness):
    h = provisioned(make_harness, "gcp", max_run_hours=2.5)
    assert not h.path("/etc/systemd/system/trainvm-max-run.timer").exists()


def test_no_idle_shutdown_still_installs_the_max_run_timer(make_harness):
    h = provisioned(make_harness, "azure", idle_shutdown_minutes=None, max_run_hours=1)
    assert h.path("/etc/systemd/system/trainvm-max-run.timer").exists()
    assert not h.path(WD).exists()
    assert "systemctl\tdisable\t--now\ttrainvm-idle.timer" in calls(h)


# ---------------------------------------------------------------------------- trainvm start
@pytest.mark.parametrize("cloud", ["azure", "aws"])
def test_start_reruns_the_script_from_the_installed_unit_and_reinstalls_nothing(make_harness, cloud):
    """`trainvm start` on Azure/AWS: custom/user data does not run again, the enabled trainvm-provision.service
    does (ExecStart is where cloud-init / the bootstrap put the script); it re-verifies, installs nothing."""
    h = provisioned(make_harness, cloud)
    unit_text = unit(h, "trainvm-provision.service")
    assert "ExecStart=/usr/local/sbin/trainvm-provision\n" in unit_text and "WantedBy=multi-user.target" in unit_text
    assert "systemctl\tenable\ttrainvm-provision.service" in calls(h)
    h.stop_start()
    again = h.run()
    assert again.status == "ready" and again.installs() == [], again.output[-2000:]
    assert not h.path("/run/trainvm/idle-since").exists()  # a new boot starts with no idle clock


# ---------------------------------------------------------------------------- stalled GPU (issue 30)
# lifecycle.idle_gpu_util_percent / idle_gpu_minutes: a process holding /dev/nvidia* while every GPU stays below
# the threshold for N minutes no longer counts as busy. The clock is /run/trainvm/gpu-low-since (boot-keyed), moved
# back by the test like the idle clock; nvidia-smi is the stub's (STUB_GPU_UTIL, every GPU).
def age_gpu_clock(h, minutes: int) -> None:
    f = h.path("/run/trainvm/gpu-low-since")
    boot, since = f.read_text().split()
    f.write_text(f"{boot} {int(since) - minutes * 60}\n")


def holding_gpu(make_harness, **lifecycle):
    h = provisioned(make_harness, "azure", **lifecycle)
    h.process(4242, "python", ("/dev/nvidia0", "/dev/nvidiactl"))
    return h


def test_training_at_80_percent_stays_busy(make_harness):
    h = holding_gpu(make_harness)
    for _ in range(3):
        out, log = check(h, STUB_GPU_UTIL="80")
        assert out.returncode == 0 and "deallocate" not in log, out.stdout
    assert not h.path("/run/trainvm/gpu-low-since").exists() and not h.path("/run/trainvm/idle-since").exists()


def test_stalled_at_0_percent_for_n_minutes_goes_idle(make_harness):
    """The default rule (below 5 % for 60 minutes), then the idle clock (60 minutes): stopped, never earlier."""
    h = holding_gpu(make_harness)
    out, log = check(h, STUB_GPU_UTIL="0")
    assert h.path("/run/trainvm/gpu-low-since").exists() and not h.path("/run/trainvm/idle-since").exists()
    age_gpu_clock(h, 59)
    out, log = check(h, STUB_GPU_UTIL="0")  # 59 minutes below 5 %: the holder still counts as busy
    assert not h.path("/run/trainvm/idle-since").exists() and "deallocate" not in log
    age_gpu_clock(h, 2)
    out, log = check(h, STUB_GPU_UTIL="0")  # 61 minutes: the stalled holder is idle; the idle clock starts
    assert h.path("/run/trainvm/idle-since").exists() and "deallocate" not in log, out.stdout
    age_idle_clock(h, 61)
    out, log = check(h, STUB_GPU_UTIL="0")
    assert "idle for 61 minutes (limit 60): stop" in out.stdout and "GPU held below 5 %" in out.stdout
    assert f"{AZ_VM}/deallocate" in log


def test_gpu_work_resumes_resets_the_stall_clock(make_harness):
    """A data-loading phase (low GPU) that ends before N minutes never counts as idle."""
    h = holding_gpu(make_harness)
    check(h, STUB_GPU_UTIL="1")
    age_gpu_clock(h, 59)
    check(h, STUB_GPU_UTIL="64")
    assert not h.path("/run/trainvm/gpu-low-since").exists()
    check(h, STUB_GPU_UTIL="0")
    age_gpu_clock(h, 30)
    out, log = check(h, STUB_GPU_UTIL="0")
    assert not h.path("/run/trainvm/idle-since").exists()


def test_rule_off_keeps_a_gpu_holder_busy_forever(make_harness):
    h = holding_gpu(make_harness, idle_gpu_minutes=None)
    check(h, STUB_GPU_UTIL="0")
    assert not h.path("/run/trainvm/gpu-low-since").exists() and not h.path("/run/trainvm/idle-since").exists()


def test_threshold_and_minutes_from_the_profile(make_harness):
    h = holding_gpu(make_harness, idle_gpu_util_percent=20, idle_gpu_minutes=10)
    check(h, STUB_GPU_UTIL="12")  # below 20 %: low
    age_gpu_clock(h, 11)
    check(h, STUB_GPU_UTIL="12")
    assert h.path("/run/trainvm/idle-since").exists()
    check(h, STUB_GPU_UTIL="25")  # at 20 % or more: busy again, both clocks reset
    assert not h.path("/run/trainvm/gpu-low-since").exists() and not h.path("/run/trainvm/idle-since").exists()


def test_a_stalled_trainvm_job_does_not_keep_the_vm_but_cpu_load_and_sessions_do(make_harness):
    h = holding_gpu(make_harness)
    job = {"STUB_GPU_UTIL": "0", "STUB_ACTIVE_JOBS": "trainvm-job-20261122-100000.service"}
    check(h, **job)
    age_gpu_clock(h, 61)
    check(h, **job)
    assert h.path("/run/trainvm/idle-since").exists()  # the job's unit is the stalled holder
    check(h, **job, STUB_WHO="alice pts/0 2026-11-22 10:00 (203.0.113.7)")
    assert not h.path("/run/trainvm/idle-since").exists()  # someone is logged in
    h.path("/proc/loadavg").write_text("1.45 1.20 0.90 2/311 4242\n")
    check(h, **job)
    assert not h.path("/run/trainvm/idle-since").exists()  # a CPU-bound phase (data loading) is busy


@pytest.mark.parametrize("cloud", ["gcp", "azure", "aws"])
def test_a_vm_whose_provisioning_failed_is_stopped_when_idle(make_harness, cloud):
    """Money: the watchdog is armed before anything can fail. A startup script that fails (here: the driver the VM
    loads is not the pinned one) leaves the idle timer enabled, and once the failed run no longer holds the lock an
    idle check stops the VM the way its cloud ends billing; before, the watchdog phase came last, so a failed GPU VM
    billed until someone ran `down`."""
    h = make_harness(script(cloud), cloud=cloud, STUB_LOADED_DRIVER="550.90.07")
    run = h.run()
    assert re.fullmatch(r"failed:driver:\d+", run.status), run.output[-2000:]
    assert run.report["phases"]["watchdog"]["status"] in ("done", "verified")
    assert "IDLE_MINUTES=60" in h.path("/etc/trainvm/watchdog.conf").read_text()
    assert h.path("/etc/systemd/system/trainvm-idle.timer").exists()
    out, log = go_idle(h)
    assert "idle for 61 minutes" in out.stdout, out.stdout
    assert "poweroff" in log or "deallocate" in log or "StopInstances" in log, log
