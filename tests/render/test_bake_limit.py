"""The builder's own limit (issue #28: "the builder and its disks are always deleted"), run under the stub harness:
a bake-mode script arms the max-run timer of ``up`` (lifecycle ``max_run_hours`` = TRAINVM_BAKE_TIMEOUT + the
margin, ``on_max_run: delete``) before its first install phase, so that a builder whose ``trainvm`` died (SIGKILL, a
sleeping workstation) deletes itself (Azure: its resource group through ARM with the VM's identity) or terminates
(AWS: a guest shutdown, InstanceInitiatedShutdownBehavior=terminate) at that deadline; ``bake-clean`` disarms it, so
the captured disk carries no timer and a VM booting the image keeps the profile's own lifecycle.

What the harness does not model: systemd itself. A timer firing at ``OnBootSec`` is systemd's; these tests check the
unit's ``OnBootSec`` is the bound, that nothing acted during the run (before the deadline), and run the unit's
``ExecStart`` as systemd would at the deadline. The clouds' side (the shutdown behaviour, the role) is in
tests/bake/ through the emulators."""

from __future__ import annotations

import dataclasses
import re
import subprocess

import pytest
import trainvm_render_support as S

from provisioner.bake.run import BUILDER_LIMIT_MARGIN_S, builder_lifecycle, builder_limit_hours
from provisioner.render import render_script

LC = "/usr/local/sbin/trainvm-lifecycle"
TIMER = "/etc/systemd/system/trainvm-max-run.timer"
SERVICE = "/etc/systemd/system/trainvm-max-run.service"
CONF = "/etc/trainvm/watchdog.conf"
AZ_GROUP = "https://management.azure.com/subscriptions/sub-1/resourceGroups/trainvm-vm?api-version=2021-04-01"
BOUND_S = int(5400 + BUILDER_LIMIT_MARGIN_S)  # the default TRAINVM_BAKE_TIMEOUT (5400 s) + the margin


def _lp(cloud: str):
    return S.data_native_to(S.loaded(S.GOLDEN_PROFILE), cloud)


def _bake(cloud: str, timeout_s: float = 5400.0) -> str:
    """The bake-mode script as ``trainvm bake`` renders it (provisioner/bake/run.plan_bake): the builder's lifecycle."""
    lp = _lp(cloud)
    lifecycle = builder_lifecycle(lp.profile.lifecycle, builder_limit_hours(timeout_s))
    return render_script(lp, S.target_for(cloud, lp), image_mode="bake", lifecycle=lifecycle).startup_sh


def _baked(cloud: str) -> str:
    """The baked-mode script as ``up`` renders it on a baked image: the profile's own lifecycle."""
    lp = _lp(cloud)
    return render_script(lp, S.target_for(cloud, lp), image_mode="baked").startup_sh


def _calls(h) -> list[str]:
    log = h.state / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def _acted(lines: list[str]) -> list[str]:
    """A lifecycle action: a guest shutdown, an ARM call (deallocate / delete), an EC2 call."""
    return [c for c in lines if c.startswith(("systemctl\tpoweroff", "ec2\t"))
            or (c.startswith("curl\t") and c.split("\t")[-1].startswith("https://management.azure.com/"))]


@pytest.mark.parametrize("cloud", ["azure", "aws"])
def test_a_builder_whose_trainvm_died_deletes_itself_at_the_deadline_and_not_before(make_harness, cloud):
    """The bake fails in the packages phase (no trainvm left to delete the builder): the max-run timer was armed
    before the first install phase, with the bound; nothing acted during the run; at the deadline its unit deletes
    the builder (Azure: DELETE of the builder's resource group, never a poweroff, which leaves an Azure VM billing;
    AWS: a guest shutdown, which the create request's InstanceInitiatedShutdownBehavior=terminate makes a terminate)."""
    h = make_harness(_bake(cloud), cloud=cloud, STUB_PIP_FAIL="1")
    run = h.run()
    assert run.rc != 0 and run.status.startswith("failed:packages:"), run.output[-3000:]
    lines = _calls(h)
    enable = next(i for i, c in enumerate(lines) if c.startswith("systemctl\tenable\t--now\t") and "trainvm-max-run.timer" in c)
    first_install = next(i for i, c in enumerate(lines) if c.startswith(("apt-get\t", "uv\t")))
    assert enable < first_install, lines[:first_install + 1]  # armed before anything that could hang
    assert "trainvm-idle.timer" not in lines[enable]  # the builder has no idle shutdown: it is busy, then stopped
    assert _acted(lines) == []  # not before the deadline
    timer = h.path(TIMER).read_text()
    assert f"OnBootSec={BOUND_S}s" in timer
    conf = h.path(CONF).read_text()
    assert "ON_MAX_RUN=delete" in conf and "IDLE_MINUTES=0" in conf
    m = re.search(r"^ExecStart=(\S+) (.+)$", h.path(SERVICE).read_text(), re.M)
    assert m and m.group(1) == LC and m.group(2) == "delete max-run"
    # the deadline: systemd runs the unit's ExecStart
    (h.state / "calls.log").unlink(missing_ok=True)
    r = subprocess.run(["bash", str(h.path(m.group(1))), *m.group(2).split()], env=h.env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    acted = _acted(_calls(h))
    if cloud == "azure":
        assert len(acted) == 1 and acted[0].split("\t")[-1] == AZ_GROUP and "\t-X\tDELETE\t" in acted[0], acted
    else:
        assert acted == ["systemctl\tpoweroff"] and "SHUTDOWN_DOES=delete" in conf
        assert "InstanceInitiatedShutdownBehavior does delete" in r.stdout


def test_the_bound_follows_trainvm_bake_timeout():
    """TRAINVM_BAKE_TIMEOUT 4 h: the builder's bound is 4 h + the margin, past the wait trainvm itself makes."""
    script = _bake("azure", timeout_s=4 * 3600.0)
    assert re.search(rf"^TV_MAX_RUN_SECONDS='?{4 * 3600 + int(BUILDER_LIMIT_MARGIN_S)}'?$", script, re.M)
    assert re.search(r"^TV_ON_MAX_RUN='?delete'?$", script, re.M) and re.search(r"^TV_IDLE_MINUTES='?0'?$", script, re.M)


def test_gce_has_no_timer_on_the_builder_its_maxrunduration_bounds_it(make_harness):
    h = make_harness(_bake("gcp"))
    run = h.run()
    assert run.status == "baked", run.output[-3000:]
    assert re.search(r"^TV_MAX_RUN_SECONDS='?0'?$", _bake("gcp"), re.M)
    assert not h.path(TIMER).exists() and _acted(_calls(h)) == []


@pytest.mark.parametrize("cloud", ["azure", "aws"])
def test_bake_clean_disarms_the_limit_so_the_image_carries_none(make_harness, cloud):
    """A successful bake: the timer was armed, and bake-clean disarmed it (stopped and disabled, its units, the
    lifecycle program and its configuration removed) before the seal: trainvm stops the builder and captures the
    disk, which holds no timer that could delete a VM booting the image."""
    h = make_harness(_bake(cloud), cloud=cloud)
    run = h.run()
    assert run.rc == 0 and run.status == "baked", run.output[-3000:]
    lines = _calls(h)
    enable = next(i for i, c in enumerate(lines) if c.startswith("systemctl\tenable\t--now\t") and "trainvm-max-run.timer" in c)
    disable = next(i for i, c in enumerate(lines) if c.startswith("systemctl\tdisable\t--now\t") and "trainvm-max-run.timer" in c)
    assert enable < disable
    assert _acted(lines) == []
    for rel in (TIMER, SERVICE, LC, CONF, "/etc/systemd/system/timers.target.wants/trainvm-max-run.timer",
                "/etc/systemd/system/trainvm-idle.timer", "/usr/local/sbin/trainvm-idle-watchdog"):
        assert not (h.path(rel).exists() or h.path(rel).is_symlink()), rel
    assert "removed /etc/systemd/system/trainvm-max-run.timer" in run.output


def test_a_bake_rendered_with_the_profiles_lifecycle_leaves_no_idle_watchdog_either(make_harness):
    """render_script(image_mode="bake") without the builder's lifecycle arms the profile's (idle 60 min, max run
    24 h) on the builder; bake-clean removes that too, so the image carries no timer of any kind."""
    lp = _lp("azure")
    h = make_harness(render_script(lp, S.target_for("azure", lp), image_mode="bake").startup_sh, cloud="azure")
    run = h.run()
    assert run.rc == 0 and run.status == "baked", run.output[-3000:]
    assert any(c.startswith("systemctl\tenable\t--now\ttrainvm-idle.timer") for c in _calls(h))
    for rel in (TIMER, SERVICE, LC, CONF, "/etc/systemd/system/trainvm-idle.timer",
                "/etc/systemd/system/trainvm-idle.service", "/usr/local/sbin/trainvm-idle-watchdog"):
        assert not h.path(rel).exists(), rel


@pytest.mark.parametrize("cloud", ["azure", "aws"])
def test_a_vm_booting_the_image_keeps_the_profiles_own_lifecycle(make_harness, cloud):
    """The golden profile: idle 60 min -> stop, max run 24 h -> stop. The VM booting the baked image arms that, not
    the builder's 2 h delete."""
    h = make_harness(_bake(cloud), cloud=cloud)
    assert h.run().status == "baked"
    h.reboot()
    h.unpack_payload()
    h.script.write_text(_baked(cloud), encoding="utf-8")
    run = h.run()
    assert run.rc == 0 and run.status == "ready", run.output[-3000:]
    assert "OnBootSec=86400s" in h.path(TIMER).read_text()
    assert re.search(r"^ExecStart=\S+ stop max-run$", h.path(SERVICE).read_text(), re.M)
    conf = h.path(CONF).read_text()
    assert "IDLE_MINUTES=60" in conf and "ON_IDLE=stop" in conf and "ON_MAX_RUN=stop" in conf
    assert _acted(_calls(h)) == []


def test_the_builders_lifecycle_leaves_the_stack_identity_and_the_data_tools_the_profiles():
    """An AWS profile with a mixed lifecycle (idle delete, max run stop) needs the s3 tool's boto3 for its own EC2
    TerminateInstances: the bake installs it (the VM booting the image needs it), although the builder's own
    lifecycle (all delete: a guest shutdown) needs none, and the image's stack identity is the one ``up`` computes."""
    from provisioner.profile.loader import profile_hash
    from provisioner.providers.image_identity import stack_hash
    from provisioner.render import build_context

    lp = _lp("aws")
    lc = lp.profile.lifecycle.model_copy(update={"on_idle": "delete", "on_max_run": "stop", "max_run_hours": 2})
    profile = lp.profile.model_copy(update={"lifecycle": lc})
    lp = dataclasses.replace(lp, profile=profile, hash=profile_hash(profile))
    target = S.target_for("aws", lp)
    builder = builder_lifecycle(lc, builder_limit_hours(5400.0))
    bake = build_context(lp, target, None, "bake", lifecycle=builder)
    own = build_context(lp, target, None, "")
    assert (bake.on_max_run, bake.shutdown_does, bake.idle_minutes) == ("delete", "delete", 0)
    assert (own.on_max_run, own.shutdown_does) == ("stop", "stop")
    assert bake.datatools == own.datatools and bake.aws_sdk and stack_hash(bake) == stack_hash(own)
