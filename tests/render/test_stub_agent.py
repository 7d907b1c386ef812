"""The one agent under the stub harness: the rendered script's ready gate (python3 -m provisioner.agent
from /opt/trainvm/current/agent) and `trainvm verify` on the report it publishes reach the same verdict
(issue: a cuDNN pin torch's 90100 cannot prove)."""

from __future__ import annotations

import re

import pytest
import trainvm_render_support as S

from provisioner.verify.compare import compare


def run(make_harness, tmp_path, **stack):
    lp = S.from_dict(S.minimal_profile(**stack), path=tmp_path / "p.yaml")
    h = make_harness(S.render(lp, "gcp").startup_sh)
    return h.run(), lp.profile.model_dump(mode="json")


@pytest.mark.parametrize(("packages", "ready", "observed"), [
    (["torch==2.4.1+cu124"], False, "9.1.0"),
    (["torch==2.4.1+cu124", "nvidia-cudnn-cu12==9.1.0.70"], True, "9.1.0.70"),
])
def test_cudnn_pin_the_same_verdict_on_the_vm_and_in_verify(make_harness, tmp_path, packages, ready, observed):
    result, profile = run(make_harness, tmp_path, cudnn="9.1.0.70", packages=packages)
    verdict = compare(profile, result.report)
    cudnn = next(f for f in verdict.fields if f.field == "stack.cudnn")
    assert (cudnn.ok, cudnn.observed) == (ready, observed)
    if ready:
        assert result.rc == 0 and result.status == "ready", result.output[-3000:]
        assert verdict.status == "match", verdict.drifted
    else:
        assert re.fullmatch(r"failed:packages:\d+", result.status), result.output[-3000:]
        assert f"MISMATCH stack.cudnn: expected 9.1.0.70, found {observed}" in result.output
        assert verdict.status == "failed" and [f.field for f in verdict.drifted] == ["status", "stack.cudnn"]


def test_the_report_is_the_agents_probe_with_the_scripts_phases(make_harness, tmp_path):
    result, _ = run(make_harness, tmp_path)
    rep = result.report
    assert result.status == "ready", result.output[-3000:]
    # keys of the one probe (what verify --local reports too), and the VM's own
    assert {"cuda_runtime", "package_sources", "python_env", "notes", "blas"} <= set(rep)
    assert rep["source"] == "vm" and rep["profile_hash"] and rep["phases"]["packages"]["status"] in ("done", "verified")
    assert rep["python"] == "3.11.9" and rep["framework"]["name"] == "torch"  # the venv, probed from the image's python3
