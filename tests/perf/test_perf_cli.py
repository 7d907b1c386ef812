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
    assert r.code == 1, (r.err, r.out[-2000:])
    verdicts = {v["metric"]: v["verdict"] for v in r.json()["metrics"]}
    assert verdicts["cpu_single_units_s"] == "worse"


def test_verify_vm_perf_reads_the_report(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, install_providers) -> None:
    from tests.fakes import FakeProvider

    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    t4 = str(Path(__file__).resolve().parents[2] / "profiles" / "examples" / "bert-finetune-t4.yaml")
    fake = FakeProvider("gcp")
    install_providers({"gcp": fake})
    name = cli("up", t4, "--yes", "--json", "--cloud", "gcp").json()["name"]
    base = tmp_path / "ws.perf.json"
    base.write_text(json.dumps(doc(loader_data_w0_items_s=m(900, "loader", workers=0))))
    r = cli("verify", name, "--perf")
    assert r.code == 2 and "--baseline" in r.err
    r = cli("verify", name, "--perf", "--baseline", str(base))
    assert r.code == 1 and "no report yet" in r.err
    fake.reports[name] = {"schema": 1, "status": "ready"}
    r = cli("verify", name, "--perf", "--baseline", str(base))
    assert r.code == 1 and "a report without a perf result" in r.err
    vm = doc(loader_data_w0_items_s=m(300, "loader", workers=0),
             host={"data_fs": {"path": "/mnt/data/glue", "fstype": "nfs4", "mount_point": "/mnt/data", "network": True}})
    fake.reports[name] = {"schema": 1, "status": "ready", "perf": vm}
    r = cli("verify", name, "--perf", "--baseline", str(base), "--json")
    assert r.code == 1, r.err
    (v,) = r.json()["metrics"]
    assert v["verdict"] == "worse" and any("nfs4" in c["cause"] for c in v["causes"])
    fake.reports[name]["perf"] = json.loads(base.read_text())
    assert cli("verify", name, "--perf", "--baseline", str(base)).code == 0


def test_capture_perf_needs_an_output_file(cli) -> None:
    r = cli("capture", "--perf")
    assert r.code == 2 and "PROFILE.perf.json" in r.err


def test_baseline_path() -> None:
    assert perfcmd.baseline_path(Path("profiles/ws.yaml")) == Path("profiles/ws.perf.json")


# ------------------------------------------------------------------ probe -o FILE (issue 30): every form writes the file
@pytest.mark.parametrize("argv", [["-o"], ["--out"], ["--json", "-o"]], ids=" ".join)
def test_probe_out_writes_the_stack_report(cli, tmp_path: Path, argv: list[str]) -> None:
    out = tmp_path / "ws.probe.json"
    r = cli("probe", *argv, str(out))
    assert r.code == 0, r.err
    assert out.exists(), "probe -o wrote no file"
    written = json.loads(out.read_text())
    assert written["source"] == "local" and "packages" in written
    assert json.loads(r.out) == written  # the same report as on stdout
    assert f"wrote {out}" in r.err


@pytest.mark.parametrize("perf", [False, True], ids=["stack", "perf"])
@pytest.mark.parametrize("where", ["folder", "missing_parent"])
def test_probe_out_that_cannot_be_written_is_an_input_error_before_probing(cli, tmp_path: Path, monkeypatch, perf, where) -> None:
    ran = []
    monkeypatch.setattr(perfcmd, "run_perf_probe", lambda *a, **k: ran.append("perf") or {})
    monkeypatch.setattr("provisioner.probe.report.probe", lambda **k: ran.append("stack") or {})
    target = tmp_path if where == "folder" else tmp_path / "no" / "such" / "ws.json"
    r = cli("probe", *(["--perf"] if perf else []), "-o", str(target))
    assert r.code == 2, (r.out, r.err)
    words = "is a folder; give a file name" if where == "folder" else f"no such folder: {target.parent}"
    assert f"-o {target}: {words}" in r.err
    assert "internal error" not in r.err and "Errno" not in r.err and ran == []  # refused before the probe ran


def test_the_perf_table_shows_efficiency_only_with_its_spec_and_the_details_it_has(capsys: pytest.CaptureFixture[str]) -> None:
    """``probe --perf``'s table (issue 37: the document is a TypedDict, read key by key): a metric with an efficiency
    but no spec (a document not annotated by this trainvm; the schema allows it) is shown without the efficiency note
    rather than failing with a TypeError; the spec'd one and a loader's workers are noted."""
    annotated = m(100.0, "gpu_compute", "TFLOPS", efficiency=0.5, spec={"figure": 200.0, "variant": "SXM", "source": "x"})
    perfcmd.print_perf(doc(matmul_bf16_tflops=annotated, matmul_fp16_tflops=m(90.0, "gpu_compute", efficiency=0.4),
                           loader_w4_items_s=m(500.0, "loader", workers=4)))
    out = capsys.readouterr().out
    assert "50% of 200 (SXM)" in out and "40%" not in out and "workers 4" in out
