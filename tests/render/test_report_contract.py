"""The stack report contract: both writers -- the VM's helper (run by the rendered startup script under
the stub harness) and the local probe -- produce what the one decoder (provisioner.verify.report)
accepts, through every channel a provider reads (console line, guest attribute / file JSON, Run
Command's gzip+base64)."""

from __future__ import annotations

import base64
import gzip
import json
import re
import sys
from pathlib import Path

import pytest
import trainvm_render_support as S

from provisioner.probe.gpu import CommandResult
from provisioner.probe.report import probe
from provisioner.verify.report import StackReport, decode_report, last_console_report

REPO = Path(__file__).resolve().parents[2]


def _script() -> str:
    return S.render(S.loaded(S.REPO / "profiles/examples/bert-finetune-t4.yaml"), "gcp").startup_sh


def _channels(doc: dict) -> list[str]:
    text = json.dumps(doc)
    return [text, base64.b64encode(text.encode()).decode(), base64.urlsafe_b64encode(text.encode()).decode(),
            base64.b64encode(gzip.compress(text.encode())).decode()]


def test_the_vm_helper_report_decodes_through_every_channel(make_harness) -> None:
    h = make_harness(_script())
    run = h.run()
    assert run.rc == 0, run.output[-2000:]
    on_disk = json.loads(h.path("/var/lib/trainvm/report.json").read_text())
    from_console = last_console_report(run.output)
    assert from_console is not None and from_console.source == "vm" and from_console.state == "ready"
    assert from_console.as_dict() == StackReport.model_validate(on_disk).as_dict()
    for text in _channels(on_disk):
        assert decode_report(text) == from_console
    assert from_console.phases["driver"].seconds >= 0 and from_console.gpus[0].name == "Tesla T4"


def test_a_failed_run_decodes_with_phase_line_and_message(make_harness) -> None:
    h = make_harness(_script(), STUB_LOADED_DRIVER="550.90.07")
    run = h.run()
    report = last_console_report(run.output)
    assert report is not None and report.state == "failed" and report.phase == "driver"
    assert report.line and f"failed:driver:{report.line}" == run.status
    assert report.error and "expected driver 550.127.05" in report.error


def test_the_no_python_fallback_report_decodes() -> None:
    template = (REPO / "templates/phases/_report.sh.j2").read_text()
    fallback = re.search(r"printf '(\{\"schema\": 1.*?\})\\n'", template).group(1)
    report = decode_report(fallback.replace("%s", "failed:python:40"))
    assert report is not None and (report.phase, report.line) == ("python", 40)


def test_the_local_probe_decodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # type: ignore[arg-type]
    doc = probe(data_path=str(tmp_path), runner=lambda argv: CommandResult(127, "", f"{argv[0]}: not found"))
    for text in _channels(doc):
        report = decode_report(text)
        assert report is not None and report.source == "local" and report.state == "ready"
        assert report.python == ".".join(map(str, sys.version_info[:3]))


@pytest.mark.parametrize("bad", [
    "not json", "", "e30=",  # {} has no status
    json.dumps({"schema": 2, "status": "ready"}),
    json.dumps({"schema": 1, "status": "ready", "surprise": 1}),  # a writer field the model lacks
    json.dumps({"schema": 1, "status": "done[bold]"}),
    base64.b64encode(gzip.compress(b"x" * 5_000_000)).decode(),  # a decompression bomb is not read whole
])
def test_what_is_not_a_report_decodes_to_none(bad: str) -> None:
    assert decode_report(bad) is None
