"""A profile rehearsed on a machine without a GPU (``CloudSpec.rehearsal``, issue 38's ``local`` cloud), in the stub
harness: the script rendered for a ``RenderTarget`` with ``rehearsal=True`` (no cloud has it on this branch) runs
every phase, its GPU gate checks what such a machine can show (the NVIDIA module DKMS built for the running kernel:
``modinfo -F vermagic nvidia``, vermagic's first word ``uname -r``) and says ``rehearsal: no GPU`` with what it could not check, and the final
status is ``rehearsed``, never ``ready``; the report's GPU facts are "not checked" and ``verify``'s judgement of it is
``rehearsed``, never ``match``.

Not modelled (stubs): a real DKMS build and its vermagic (the modinfo stub answers once the driver set is "installed"),
a machine whose nvidia-smi is absent rather than failing (the stub's fails: no module loaded), a real container
engine without a GPU (docker's stub refuses ``--gpus`` without a loaded module; the rehearsal's check run asks for none)."""

from __future__ import annotations

import dataclasses
import functools
import re

import trainvm_render_support as S

from provisioner.render import render_script
from provisioner.verify.compare import compare

PROFILE = S.REPO / "profiles/examples/bert-finetune-t4.yaml"


@functools.cache
def script(rehearsal: bool = True) -> str:
    lp = S.data_native_to(S.loaded(PROFILE), "gcp")
    target = dataclasses.replace(S.target_for("gcp", lp), rehearsal=rehearsal)
    return render_script(lp, target).startup_sh


def test_the_config_carries_the_rehearsal() -> None:
    assert "\nTV_REHEARSAL=1  #" in script() and "\nTV_REHEARSAL=0  #" in script(rehearsal=False)
    assert '"rehearsal":true' in script() and '"rehearsal":true' not in script(rehearsal=False)  # expected.json


def test_a_rehearsal_runs_every_phase_and_ends_rehearsed_never_ready(make_harness) -> None:
    h = make_harness(script())
    run = h.run()
    assert run.rc == 0, run.output[-3000:]
    assert run.status == "rehearsed" and "ready" not in run.statuses, run.statuses
    assert "rehearsal: no GPU; not checked: nvidia-smi, the GPU count and model, VRAM" in run.output
    assert "rehearsal: the NVIDIA kernel module (550.127.05, open) is built for the running kernel 5.15.0-1071-gcp" in run.output
    assert not run.named("reboot") and not run.named("modprobe")  # no GPU to load a module for: both reboots kept
    assert run.lines("modinfo") == ["modinfo -F vermagic nvidia"]
    rep = run.report
    assert rep["status"] == "rehearsed"
    assert set(rep["phases"]) == {"preflight", "driver", "cuda", "python", "packages", "env", "data", "watchdog"}
    assert all(p["status"] in ("done", "skipped") for p in rep["phases"].values()), rep["phases"]
    # GPU facts: not checked, never an empty list or a false that reads as an observation
    assert rep["gpus"] is None and rep["driver"] is None and rep["framework"]["cuda_available"] is None
    assert rep["not_checked"] == {k: "rehearsal: no GPU" for k in ("gpus", "driver", "cuda_driver_max", "framework.cuda_available")}
    assert '"status": "rehearsed"' in h.path("/var/lib/trainvm/status.json").read_text()
    verdict = compare(S.loaded(PROFILE).profile.model_dump(mode="json"), rep)
    assert verdict.status == "rehearsed" and not verdict.drifted, [f for f in verdict.fields if f.drifted]
    unseen = {f.field for f in verdict.fields if f.not_checked}
    assert {"status", "stack.driver", "hardware.gpu_count", "hardware.gpu", "stack.framework.gpu"} <= unseen
    assert not any(f.ok for f in verdict.fields if f.field in unseen)


def test_a_rehearsal_again_installs_nothing_and_stays_rehearsed(make_harness) -> None:
    h = make_harness(script())
    assert h.run().status == "rehearsed"
    again = h.run()
    assert again.rc == 0 and again.status == "rehearsed" and not again.installs(), again.installs()


def test_a_module_built_for_another_kernel_fails_the_rehearsal(make_harness) -> None:
    h = make_harness(script(), STUB_MODULE_KVER="5.15.0-1072-gcp")
    run = h.run()
    assert run.rc != 0 and re.fullmatch(r"failed:driver:\d+", run.status or ""), run.output[-3000:]
    assert "rehearsal: the NVIDIA kernel module is not built for the running kernel 5.15.0-1071-gcp" in run.report["error"]
    assert not run.named("reboot")


def test_without_rehearsal_the_gate_still_wants_a_gpu(make_harness) -> None:
    """The same script for a cloud with GPUs: no modinfo shortcut, the gate loads the module and asks nvidia-smi."""
    run = make_harness(script(rehearsal=False)).run()
    assert run.status == "ready" and run.named("modprobe") and not run.named("modinfo")


def test_a_container_profile_is_rehearsed_without_handing_the_container_a_gpu(make_harness) -> None:
    """The container check run asks docker for no GPU (``--gpus all`` fails where there is none); the container's
    GPU access is then a "not checked" field, and the rest of what the image holds is judged as on a VM."""
    lp = S.from_dict(S.container_profile("ubuntu-22.04"))
    run = make_harness(render_script(lp, dataclasses.replace(S.target_for("gcp", lp), rehearsal=True)).startup_sh).run()
    assert run.rc == 0 and run.status == "rehearsed", run.output[-3000:]
    check = next(c for c in run.named("docker") if c.args[0] == "run")
    assert "--gpus" not in check.args and "--ipc=host" in check.args
    verdict = compare(lp.profile.model_dump(mode="json"), run.report)
    assert verdict.status == "rehearsed", [f for f in verdict.fields if f.drifted]
    assert next(f for f in verdict.fields if f.field == "stack.container.gpu").not_checked == "rehearsal: no GPU"


def test_a_module_debian_names_nvidia_current_is_found(make_harness) -> None:
    """Debian's packaging of the driver (the replica's real nvidia-kernel-dkms 550.163.01) installs the module as
    nvidia-current.ko (loaded as `nvidia` through modprobe install lines, which modinfo does not follow): the rehearsal
    gate finds it under that name too (tests/realos/modulelane.py saw `modinfo nvidia` answer "not found")."""
    h = make_harness(script(), STUB_MODULE_NAME="nvidia-current")
    run = h.run()
    assert run.status == "rehearsed", run.output[-3000:]
    assert run.lines("modinfo") == ["modinfo -F vermagic nvidia", "modinfo -F vermagic nvidia-current"]
