"""Profile ``perf:``: the startup script writes the perf probe, runs it once the stack is ready
(real blocks 5-7 under the stub venv's interpreter; GPU blocks see the stub torch and skip or
fail cleanly), and report.json carries the result under "perf"."""

from __future__ import annotations

import dataclasses

import trainvm_render_support as S

from provisioner.profile.loader import profile_hash
from provisioner.profile.model import PerfProbe
from provisioner.verify.perfdoc import validate_doc


def perf_script(budget: int = 2) -> str:
    lp = S.loaded(S.GOLDEN_PROFILE)
    # model_copy skips validation: a 2 s budget (the schema's floor is 10) keeps the test short
    profile = lp.profile.model_copy(update={"perf": PerfProbe.model_construct(budget_s=budget, data=None)})
    lp = dataclasses.replace(lp, profile=profile, hash=profile_hash(profile))
    return S.render(lp, "gcp").startup_sh


def test_profile_without_perf_has_no_probe_and_an_unchanged_hash() -> None:
    lp = S.loaded(S.GOLDEN_PROFILE)
    text = S.render(lp, "gcp").startup_sh
    assert "TRAINVM_PERFPROBE_PY" not in text and "TV_PERF_BUDGET=0" in text
    assert "perf" not in lp.profile.model_dump(mode="json", exclude_none=True)
    with_perf = lp.profile.model_copy(update={"perf": PerfProbe()})
    assert profile_hash(with_perf) != lp.hash  # turning the probe on is a change of the VM


def test_perf_phase_runs_the_probe_and_the_report_carries_it(make_harness) -> None:
    h = make_harness(perf_script())
    run = h.run()
    assert run.rc == 0, run.output[-3000:]
    assert run.status == "ready"
    rep = run.report
    assert rep["phases"]["perf"]["status"] == "done"
    perf = validate_doc(rep["perf"], "report.perf")
    assert perf["blocks"]["cpu"]["status"] == "ok" and perf["blocks"]["disk"]["status"] == "ok"
    assert perf["context"]["host"]["data_fs"]["path"].endswith("/mnt/data/glue")
    assert all("raw_ms" not in m for b in perf["blocks"].values() for m in b["metrics"].values())
    # a second run re-uses the result: no second probe
    again = h.run()
    assert again.rc == 0 and again.report["perf"]["created"] == perf["created"]
    assert again.report["phases"]["perf"]["status"] == "verified"


def test_perf_variant_is_shellcheck_clean(tmp_path) -> None:
    import pytest

    if S.shellcheck_bin() is None:
        pytest.skip("shellcheck not installed")
    path = tmp_path / "perf-gcp.sh"
    path.write_text(perf_script(90))
    assert S.shellcheck([path]) == {}
