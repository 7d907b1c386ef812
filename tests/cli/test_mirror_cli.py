"""CLI: capture (on this GPU-less machine), verify --local, diff."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import EXAMPLES, REPO

REPORT = REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json"


def test_capture_writes_a_profile_that_validates(cli, tmp_path: Path) -> None:
    out = tmp_path / "ws.yaml"
    r = cli("capture", "-o", str(out), "--name", "my-ws", "--data", str(tmp_path))
    assert r.code == 0, r.err
    text = out.read_text()
    assert text.startswith("#") and "name: my-ws" in text
    assert "warning" in r.err  # no GPU / no driver here: said, not crashed
    v = cli("validate", str(out))
    assert v.code == 0, v.err


def test_capture_json_is_the_profile(cli) -> None:
    r = cli("capture", "--json")
    assert r.code == 0
    doc = r.json()
    assert {"name", "hardware", "stack"} <= set(doc) and doc["stack"]["packages"]


def test_capture_bad_python_is_input_error(cli, tmp_path: Path) -> None:
    assert cli("capture", "--python", str(tmp_path / "nope")).code == 2


def test_verify_local_reports_drift_on_this_machine(cli) -> None:
    r = cli("verify", "--local", str(EXAMPLES[0]), "--json")
    assert r.code == 1
    doc = r.json()
    assert doc["status"] == "drift" and doc["target"].startswith("local:")
    by_field = {f["field"]: f for f in doc["fields"]}
    # no GPU here: the driver cannot be observed (skipped, and said so); the profile's T4 still drifts
    assert by_field["stack.driver"]["skipped"] and by_field["stack.driver"]["observed"] is None
    assert by_field["hardware.gpu"]["ok"] is False and by_field["hardware.gpu_count"]["ok"] is False


def test_verify_local_text_table(cli) -> None:
    r = cli("verify", "--local", str(EXAMPLES[0]))
    assert r.code == 1 and "DRIFT" in r.out and "hardware.gpu" in r.out


def test_diff_profile_vs_report_and_identical(cli, tmp_path: Path) -> None:
    r = cli("diff", str(EXAMPLES[0]), str(REPORT), "--json")
    assert r.code in (0, 1)
    same = cli("diff", str(EXAMPLES[0]), str(EXAMPLES[0]))
    assert same.code == 0 and "no differences" in same.out
    a = json.loads(REPORT.read_text())
    b = dict(a, driver="535.216.03")
    (tmp_path / "b.json").write_text(json.dumps(b))
    d = cli("diff", str(REPORT), str(tmp_path / "b.json"), "--json")
    assert d.code == 1 and {"field": "driver", "a": "550.127.05", "b": "535.216.03"} in d.json()["differences"]


def test_diff_two_profiles(cli) -> None:
    d = cli("diff", str(EXAMPLES[0]), str(EXAMPLES[1]), "--json")
    assert d.code == 1 and any(x["field"] == "name" for x in d.json()["differences"])


def test_diff_bad_json_is_input_error(cli, tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    assert cli("diff", str(bad), str(REPORT)).code == 2
