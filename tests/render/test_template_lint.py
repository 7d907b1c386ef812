"""Template lint: every value reaches a shell template through the one quoting filter.

- every ``{{ ... }}`` in a shell template is ``{{ <name> | shq }}`` (the bootstrap also includes its cloud's
  fetch function and the metadata URL, both repository text);
- no interpolation on a comment line (a quoted value there could still end the comment);
- heredocs are quoted (``<<'TRAINVM_…'``) except the driver pin, which expands only a variable;
- the files included verbatim (Python helper, watchdog) hold no Jinja markers and no heredoc
  delimiter line.
"""

from __future__ import annotations

import re

import trainvm_render_support as S

from provisioner.render.shell import shq

TEMPLATES = S.REPO / "templates"
EXPR = re.compile(r"\{\{(.*?)\}\}", re.S)
SHQ = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_.]*\s*\|\s*shq\s*$")
YAML_OK = re.compile(r"^\s*script\s*\|\s*yaml_block\(\d+\)\s*$")


def _templates():
    return sorted(p for p in TEMPLATES.rglob("*.j2"))


# The only values embedded without shq: a data-tool lock inside its quoted heredoc and that heredoc's delimiter.
# render/data.py data_tools() admits only pin lines (PIN_LINE: NAME==VERSION --hash=sha256:HEX) from the
# repository's templates/datatools files, and the delimiter is TRAINVM_LOCK_ + one of COPY_SCHEMES.
VERBATIM = {("phases/_data.sh.j2", "t.lock"), ("phases/_data.sh.j2", "t.heredoc"),
            ("bootstrap/bootstrap.sh.j2", "fetch")}  # the fetch function: repository text (templates/bootstrap)


def test_every_interpolation_goes_through_shq():
    bad = []
    for path in _templates():
        text = path.read_text()
        for m in EXPR.finditer(text):
            expr = m.group(1)
            if (str(path.relative_to(TEMPLATES)), expr.strip()) in VERBATIM:
                continue
            ok = YAML_OK.match(expr) if path.name.endswith(".yaml.j2") else SHQ.match(expr)
            if not ok:
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{path.relative_to(TEMPLATES)}:{line}: {{{{{expr}}}}}")
    assert bad == [], "interpolations that bypass the quoting filter:\n" + "\n".join(bad)
    assert sum(len(EXPR.findall(p.read_text())) for p in _templates()) > 40


def test_no_interpolation_in_comments_and_no_unsafe_jinja():
    for path in _templates():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("#"):
                assert "{{" not in line, f"{path.name}:{n}: value in a comment"
            assert "|safe" not in line.replace(" ", ""), f"{path.name}:{n}"
            assert "autoescape" not in line


def test_heredocs_are_quoted():
    unquoted = []
    for path in _templates():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"<<-?\s*(['\"]?)([A-Za-z_]+)\1", line):
                if not m.group(1) and m.group(2) != "TRAINVM_PIN":
                    unquoted.append(f"{path.name}:{n}: {line.strip()}")
    assert unquoted == []


def test_verbatim_files_have_no_jinja_markers_or_delimiters():
    for name in ("trainvm_helper.py", "trainvm-idle-watchdog.sh", "trainvm-lifecycle-gcp.sh", "trainvm-lifecycle-azure.sh",
                 "trainvm-lifecycle-aws.sh"):
        text = (TEMPLATES / "files" / name).read_text()
        assert not re.search(r"\{\{|\{%|\{=#", text), name
        assert not re.search(r"^TRAINVM_[A-Z_]+$", text, re.M), name


def test_shq_quotes_every_string_as_one_word():
    assert shq("us-central1-a") == "'us-central1-a'"
    assert shq("") == "''"
    assert shq("a'b") == "'a'\"'\"'b'"
    assert shq(60) == "60" and shq(True) == "1" and shq(False) == "0"
    import pytest

    from provisioner.errors import RenderError

    for bad in (None, 1.5, ["x"], "nul\x00byte"):
        with pytest.raises(RenderError):
            shq(bad)
