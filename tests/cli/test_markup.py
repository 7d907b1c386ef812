"""Text from users and clouds is printed as it is, never read as rich markup (output.py's consoles
are the one place that decides it): every message path gets hostile markup and must show it verbatim."""

from __future__ import annotations

import json

from provisioner.errors import CloudError
from provisioner.providers.base import CapacityError
from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
HOSTILE = "[/bold][red]x[/red] :smile: [link=http://e]y[/link] [/]"
REPORT = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())


def test_validate_keeps_square_brackets_in_values_and_keys(cli, write_yaml) -> None:
    p = write_yaml('name: m\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\n'
                   "stack:\n  packages: ['jax[cuda12]>=0.4']\n\"[/bold]\": 1\n")
    r = cli("validate", str(p))
    assert r.code == 1 and "internal error" not in r.err
    assert "'jax[cuda12]>=0.4'" in r.out + r.err
    assert "[/bold]: unknown key" in r.out + r.err


def test_validate_hint_with_a_regex_quantifier(cli, write_yaml) -> None:
    p = write_yaml("name: 'Bad Name!'\nhardware: {gpu: T4}\nstack: {python: '3.11.9'}\n")
    r = cli("validate", str(p))
    assert r.code == 1 and "{0," in r.out + r.err  # the pattern's {0,N} survives


def test_cloud_messages_in_attempts_and_skips(cli, clouds, monkeypatch) -> None:
    clouds["gcp"].fail("us-central1-a", CapacityError(HOSTILE, code="ZONE_[bold]EXHAUSTED"))
    r = cli("up", T4, "--yes")
    assert r.code == 0, r.err
    assert HOSTILE in r.err and "ZONE_[bold]EXHAUSTED" in r.err


def test_skipped_cloud_reason(cli, install_providers) -> None:
    def refuse(cloud):
        return lambda **_: (_ for _ in ()).throw(CloudError(f"{cloud}: {HOSTILE}"))

    install_providers({}, {c: refuse(c) for c in ("gcp", "azure", "aws")})
    r = cli("list")
    assert r.code == 3 and f"gcp: {HOSTILE}" in r.err  # no cloud could be asked: the error names each, verbatim


def test_verify_table_values(cli, clouds) -> None:
    name = cli("up", T4, "--yes", "--json").json()["name"]
    clouds["gcp"].reports[name] = dict(REPORT, driver=HOSTILE, status="failed:driver:7", error=HOSTILE)
    r = cli("verify", name)
    assert r.code == 1 and HOSTILE in r.out and r.out.count(HOSTILE) == 2  # table cell and the failure message


def test_status_table_and_error_paragraphs(cli, clouds) -> None:
    cli("up", T4, "--yes", "--json")
    rec = next(iter(clouds["gcp"].vms.values()))
    from dataclasses import replace

    clouds["gcp"].vms[rec.name] = replace(rec, profile="[b]p[/]")  # short: table cells wrap
    assert "[b]p[/]" in cli("status").out
    assert HOSTILE in cli("verify", HOSTILE).err  # an error paragraph quoting user input


def test_diff_table(cli, write_yaml) -> None:
    a = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())
    b = dict(a, driver="[red]x[/red]")
    pa, pb = write_yaml(json.dumps(a), "a.json"), write_yaml(json.dumps(b), "b.json")
    r = cli("diff", str(pa), str(pb))
    assert r.code == 1 and "[red]x[/red]" in r.out


def test_no_markup_tags_in_the_source() -> None:
    """Consoles never parse markup, so a `[red]...[/red]` in a printed string would show literally:
    style with provisioner.output.styled instead."""
    import re

    tag = re.compile(r"""["'][^"'\n]*\[/?(bold|dim|red|green|yellow|blue|cyan|magenta|italic|\{s\}|\{style\})\][^"'\n]*["']""")
    offenders = [f"{p.relative_to(REPO)}:{n}" for p in sorted((REPO / "provisioner").rglob("*.py"))
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if tag.search(line)]
    assert offenders == []
