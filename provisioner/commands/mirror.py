"""``capture``, ``verify --local`` and ``diff``: mirroring a workstation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from provisioner.commands.lock import lock_captured
from provisioner.commands.verify import _print_verify
from provisioner.errors import InputError, ReportUnreadableError
from provisioner.inputfile import read_capped
from provisioner.output import emit_json, notice, stderr_console, stdout_console, write_output
from provisioner.probe import report as probe_report  # called through the module: tests patch probe_report.probe
from provisioner.probe.capture import build_profile, comment_block, to_yaml
from provisioner.probe.python_env import user_python
from provisioner.profile import load_profile
from provisioner.providers.stack_report import MAX_REPORT_BYTES, validate_report
from provisioner.verify.compare import compare
from provisioner.verify.diff import diff, is_report


def run_capture(*, out: Path | None, name: str | None, python: str | None, data: str | None, json_out: bool) -> int:
    if data is not None and not Path(data).exists():
        raise InputError(f"--data: {data} does not exist")
    python, where = user_python(python)
    if not json_out:
        notice("note", f"capturing the Python environment of {python} ({where})")
    report = probe_report.probe(python=python, data_path=data or ".")
    profile, _comment, warnings = build_profile(report, name or "workstation")
    comment = comment_block(report, profile, warnings)
    text = to_yaml(profile, comment)
    err = stderr_console()
    for w in warnings:
        notice("warning", w)
    if json_out:
        emit_json(profile)
    elif out is None:
        sys.stdout.write(text)
    if out is not None:
        write_output(out, text, "-o")
        err.print(f"wrote {out}")

        lock_captured(out, err)
    return 0


def run_verify_local(path: Path, *, python: str | None, json_out: bool) -> int:
    loaded = load_profile(path, compat=False)
    profile = loaded.profile.model_dump(mode="json")
    if loaded.lock is not None:
        profile["lock"] = {"packages": loaded.lock.versions()}
    # data destinations are where the VM stages data; a workstation keeps its data elsewhere, so
    # staging is judged on VMs only (their report lists it)

    report = probe_report.probe(python=user_python(python)[0])
    return _print_verify(f"local:{path}", compare(profile, report), json_out)


def load_any(path: Path) -> dict[str, object]:
    """A profile (YAML, with extends resolved), a report (JSON) or a profile as JSON."""
    if path.suffix == ".json":
        raw = read_capped(path, MAX_REPORT_BYTES, "JSON document")  # a regular file, bounded before it is read
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: thousands of nested brackets
            raise InputError(f"{path}: not a JSON document ({exc})") from None
        if not isinstance(doc, dict):
            raise InputError(f"{path}: expected a JSON object (a profile or a report)")
        if is_report(doc) and doc.get("packages") is not None and not isinstance(doc["packages"], dict):
            raise InputError(f"{path}: `packages` is a JSON {'array' if isinstance(doc['packages'], list) else 'value'}; "
                             "a stack report (schema 1) has it as an object {name: version}",
                             hint="diff a report this trainvm's agent wrote (/var/lib/trainvm/report.json on the VM), "
                                  "or make `packages` an object such as {\"torch\": \"2.4.1\"}")
        if is_report(doc):  # judged as schema 1, as `verify` reads it: a field of the wrong type is named, not diffed
            try:
                validate_report(doc, f"{path}")
            except ReportUnreadableError as exc:
                raise InputError(str(exc), hint="diff a report this trainvm's agent wrote "
                                                "(/var/lib/trainvm/report.json on the VM)") from None
        return doc

    return load_profile(path, compat=False).profile.model_dump(mode="json", exclude={"extends"})


def run_diff(a: Path, b: Path, json_out: bool) -> int:
    differences = diff(load_any(a), load_any(b))
    if json_out:
        emit_json({"differences": differences})
    else:
        out = stdout_console()
        if not differences:
            out.print(f"{a} and {b}: no differences")
        else:
            from rich.table import Table

            table = Table(show_edge=False, pad_edge=False)
            table.add_column("field")
            table.add_column(str(a))
            table.add_column(str(b))
            for d in differences:
                table.add_row(d["field"], json.dumps(d["a"]), json.dumps(d["b"]))
            out.print(table)
    return 1 if differences else 0
