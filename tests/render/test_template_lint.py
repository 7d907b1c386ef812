"""Template lint: every value reaches a shell template through the one quoting filter.

- every ``{{ ... }}`` in a shell template is ``{{ <name> | shq }}``; in the cloud-init YAML
  template the only interpolation is the script through ``yaml_block``;
- no interpolation on a comment line (a quoted value there could still end the comment);
- heredocs are quoted (``<<'TRAINVM_…'``) except the driver pin, which expands only a variable;
- the files included verbatim (Python helper, watchdog) hold no Jinja markers and no heredoc
  delimiter line, and the AWS compaction keeps the helper's program identical.
"""

from __future__ import annotations

import ast
import re

import trainvm_render_support as S

from provisioner.render import render_script
from provisioner.render.compact import _prune, _strip_docstrings
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
VERBATIM = {("phases/_data.sh.j2", "t.lock"), ("phases/_data.sh.j2", "t.heredoc")}


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


def test_compaction_keeps_the_helper_program():
    rendered = S.render(S.loaded(S.GOLDEN_PROFILE), "gcp").startup_sh
    lp = S.loaded(S.GOLDEN_PROFILE)
    compact = render_script(lp, S.target_for("gcp", lp), compact=True).startup_sh

    def helper(text):
        return text.split("<<'TRAINVM_HELPER_PY'\n", 1)[1].split("\nTRAINVM_HELPER_PY\n", 1)[0]

    tree = ast.parse(helper(rendered))
    _strip_docstrings(tree)
    # the profile reads no secret:// and has no data credential: compaction drops the secret readers and the
    # credential code (looked up by name), and what only they used
    _prune(tree, frozenset())
    assert not [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith(("secret_", "cred_"))]
    assert ast.dump(tree) == ast.dump(ast.parse(helper(compact)))
    assert len(helper(compact)) < len(helper(rendered)) and "\n#" not in helper(compact)
    assert len(compact) < len(rendered)
    # the configuration block (multi-line quoted values live there) is kept byte for byte
    head = rendered.split("# ---- paths:", 1)[0]
    config = head[head.index("TV_PROFILE="):]
    assert config in compact and compact.startswith("#!/bin/bash\n")


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
