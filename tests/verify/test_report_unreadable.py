"""Issue 37 ("bad input gets a clear error, never a traceback"): a stack report that is there but malformed (an
older agent, a truncated write, a hand edit) is ``ReportUnreadableError`` (exit 3) naming the channel and each bad
field with pydantic's reason -- never None ("provisioning"), never a raw ValidationError. Blank is "no report yet"."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest

from provisioner.errors import ReportUnreadableError
from provisioner.profile import load_profile
from provisioner.providers.stack_report import decode_report, last_console_report, read_report
from provisioner.verify.compare import compare

REPO = Path(__file__).resolve().parents[2]
GOOD = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())


def _b64(doc: object) -> str:
    return base64.b64encode(json.dumps(doc).encode()).decode()


@pytest.mark.parametrize(("value", "why"), [
    (json.dumps(GOOD)[:200], "not JSON (Unterminated string"),  # a truncated write: line and column
    ("[1, 2]", "a JSON array, not an object"),
    (_b64("ready"), "a JSON string, not an object"),
    (json.dumps(dict(GOOD, gpus=[{"name": "Tesla T4", "memory_mib": "lots"}])), "gpus.0.memory_mib: Input should be"),
    (_b64(dict(GOOD, gpus="Tesla T4")), "gpus: Input should be an array"),
    (_b64(dict(GOOD, schema=2)), "schema: Input should be 1"),
    (_b64(dict(GOOD, surprise=1)), "surprise: Extra inputs are not permitted"),  # a writer field this model lacks
    (_b64(dict(GOOD, status="done")), "status: Value error, not a startup-script status: 'done'"),
    ("e30=", "status: Field required"),  # {}
    ("[" * 200_000, "not JSON (maximum recursion depth"),  # not a RecursionError traceback
    (base64.b64encode(gzip.compress(b"x" * 5_000_000)).decode(), "over 4 MiB decoded"),  # not read whole
    (base64.b64encode(b"\x1f\x8b\x08\x00garbage").decode(), "gzip stream that does not decompress"),
])
def test_a_report_that_is_there_but_malformed_names_why(value: str, why: str) -> None:
    with pytest.raises(ReportUnreadableError) as err:
        read_report(value, "the stack report of vm-1 (guest attribute trainvm/report)")
    assert str(err.value).startswith("the stack report of vm-1 (guest attribute trainvm/report)")
    assert why in str(err.value), str(err.value)
    assert err.value.exit_code == 3 and err.value.hint and "trainvm logs" in err.value.hint
    assert decode_report(value) is None  # the lenient decoder (a channel that may hold anything) stays None


@pytest.mark.parametrize("blank", [None, "", b"", "  \n"])
def test_no_report_is_none_not_an_error(blank: str | bytes | None) -> None:
    assert read_report(blank) is None


def test_a_good_report_reads_through_every_channel() -> None:
    text = json.dumps(GOOD)
    for value in (GOOD, text, _b64(GOOD), base64.b64encode(gzip.compress(text.encode())).decode()):
        report = read_report(value)
        assert report is not None and report.driver == GOOD["driver"]


def test_a_hostile_field_name_is_named_short_and_printable() -> None:
    key = "\x1b[31m" + "k" * 10_000
    with pytest.raises(ReportUnreadableError) as err:
        read_report(dict(GOOD, **{key: 1}))
    assert "\x1b" not in str(err.value) and "\\x1b[31m" in str(err.value) and len(str(err.value)) < 600


def test_many_bad_fields_are_counted_not_listed() -> None:
    with pytest.raises(ReportUnreadableError) as err:
        read_report(dict(GOOD, **{f"extra{i}": i for i in range(500)}))
    assert "and 495 more field error(s)" in str(err.value) and len(str(err.value)) < 1000


def test_the_console_s_last_report_line_decides() -> None:
    """The VM's newest word is its last TRAINVM_REPORT line: malformed, it is an error, not the older line's
    ``running:PHASE`` (which read as "provisioning" for ever)."""
    running = f"TRAINVM_REPORT={_b64(dict(GOOD, status='running:packages'))}"
    bad = f"TRAINVM_REPORT={_b64(dict(GOOD, driver=550))}"
    with pytest.raises(ReportUnreadableError, match=r"^the last TRAINVM_REPORT line of vm-1's console .*driver: "):
        last_console_report(f"boot\n{running}\n{bad}\n", "vm-1's console")
    report = last_console_report(f"{bad}\n{running}\n")
    assert report is not None and report.state == "running"
    garbled = "TRAINVM_REPORT=e30K-garbled"  # a console garbles lines: one that is not base64 of JSON is noise
    report = last_console_report(f"{running}\n{garbled}\n")
    assert report is not None and report.state == "running"
    assert last_console_report("boot\nno report yet\n") is None


def test_compare_of_a_malformed_mapping_is_the_project_s_error() -> None:
    resolved = load_profile(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml").profile.model_dump(mode="json")
    with pytest.raises(ReportUnreadableError, match=r"gpus\.0\.memory_mib: Input should be a valid integer"):
        compare(resolved, dict(GOOD, gpus=[{"name": "Tesla T4", "memory_mib": "lots"}]))
