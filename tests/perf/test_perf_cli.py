"""probe --perf, verify --local --perf and capture --perf through the real CLI (the probe runs
for real, restricted to cheap blocks through monkeypatching the block list)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import provisioner.commands.perf as perfcmd
from tests.perf.docs import doc, m


@pytest.fixture
def cheap_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    real = perfcmd.run_perf_probe
    monkeypatch.setattr(perfcmd, "run_perf_probe", lambda python, data, budget, blocks=None: real(python, data, 1.0, ["cpu"]))


def test_probe_perf_writes_a_document(cli, tmp_path: Path, cheap_probe: None) -> None:
    out = tmp_path / "ws.perf.json"
    r = cli("probe", "--perf", "-o", str(out))
    assert r.code == 0, r.err
    assert "cpu_single_units_s" in r.out and "skipped: not requested" in r.out
    assert json.loads(out.read_text())["schema"] == "trainvm.perf/1"


def test_verify_local_perf_against_the_baseline(cli, tmp_path: Path, cheap_probe: None) -> None:
    profile = tmp_path / "ws.yaml"
    profile.write_text("name: ws\n")
    r = cli("verify", str(profile), "--local", "--perf")
    assert r.code == 2 and "no perf baseline" in r.err and "ws.perf.json" in r.err
    # a baseline 100x faster than any machine: this one is "worse", exit 1
    (tmp_path / "ws.perf.json").write_text(json.dumps(doc(cpu_single_units_s=m(1e9, "cpu"))))
    r = cli("verify", str(profile), "--local", "--perf", "--json")
    assert r.code == 1, r.err
    verdicts = {v["metric"]: v["verdict"] for v in r.json()["metrics"]}
    assert verdicts["cpu_single_units_s"] == "worse"


def test_verify_vm_perf_says_it_is_not_built(cli) -> None:
    r = cli("verify", "trainvm-x", "--perf")
    assert r.code == 2 and "do not run the perf probe yet" in r.err


def test_capture_perf_needs_an_output_file(cli) -> None:
    r = cli("capture", "--perf")
    assert r.code == 2 and "PROFILE.perf.json" in r.err


def test_baseline_path() -> None:
    assert perfcmd.baseline_path(Path("profiles/ws.yaml")) == Path("profiles/ws.perf.json")
