"""AWS compaction (provisioner/render/compact.py): the same program, smaller; profile values are
never touched, whatever they contain; the embedded Python is minified to the same syntax tree;
and every bundled profile leaves headroom under the 16,384-byte user-data limit (with its data on S3 too, where
embedded files spill into instance tags)."""

from __future__ import annotations

import ast
import dataclasses
import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trainvm_render_support as S

from provisioner.profile.loader import profile_hash
from provisioner.providers.registry import cloud
from provisioner.render import build_context, render_script
from provisioner.render.compact import DYNAMIC_PREFIXES, compact_shell, minify_python
from provisioner.render.script import _render_parts, compact_script, fully_spilled
from provisioner.render.shell import shq

AWS_USER_DATA_LIMIT = cloud("aws").user_data.limit

# Bytes every bundled profile must leave free under the AWS limit (gzip user data) with every spillable embedded
# file in instance tags (render/spill.py: the most room spilling can make), so that the next template change does
# not break AWS: as it is (AWS_RESERVE), and with its data on S3 (AWS_RESERVE_S3: the s3 copy tool's lock and
# copier too). Raise them when the script shrinks; never lower them to make a template change fit: make the
# change smaller or conditional instead. Measured (bench/user_data_sizes.py): 1,322 and 978 bytes at least.
AWS_RESERVE = 1_200
AWS_RESERVE_S3 = 900
# The same with a mixed lifecycle (on_idle delete + on_max_run stop: trainvm-lifecycle's own EC2 call, the helper's
# SigV4 code, or with s3:// data the s3 copy tool's boto3 instead). Measured: 219 (as is) and 568 (s3 data) at least.
AWS_RESERVE_MIXED = 150
BUNDLED = S.EXAMPLES + sorted((S.REPO / "profiles/base").glob("*.yaml"))
# Lines that the compaction would drop or rewrite if it ever looked at them.
TRAPS = ["# ---- paths: x", "  # indented comment", "", "x  # trailing", "cat <<'TRAINVM_EVIL_PY'", "def f():", "    '''doc'''",
         "TRAINVM_EVIL_PY", "<<'TRAINVM_UNIT'", "#!/bin/sh", "   leading blanks"]


@pytest.mark.parametrize("s3", [False, True], ids=["as-is", "s3-data"])
@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_every_bundled_profile_leaves_headroom_for_aws(path, s3):
    lp = S.loaded(path)
    reserve = AWS_RESERVE_S3 if s3 else AWS_RESERVE
    for os_name in S.OS_NAMES:
        lpo = S.data_native_to(S.with_os(lp, os_name), "aws") if s3 else S.with_os(lp, os_name)
        rendered = S.render(lpo, "aws")
        assert rendered.entry == "aws-gzip" and rendered.sizes["user_data"] <= AWS_USER_DATA_LIMIT
        least, tags = fully_spilled(lpo, S.target_for("aws", lpo))
        assert tags <= cloud("aws").user_data.spill_tags
        assert AWS_USER_DATA_LIMIT - least >= reserve, f"{path.stem} on {os_name}: {least:,} bytes of {AWS_USER_DATA_LIMIT:,}"
        if not s3:  # the bundled profiles as they are need no spilling yet
            assert rendered.spilled == ()


@pytest.mark.parametrize("s3", [False, True], ids=["as-is", "s3-data"])
@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_a_mixed_lifecycle_fits_on_aws_too(path, s3):
    """A mixed stop/delete makes trainvm-lifecycle call EC2 itself. With s3:// data the s3 copy tool's boto3 makes
    that call, so the helper carries no EC2 code: before, bert-pretrain-8xa100 with s3 data and a mixed lifecycle
    did not fit even with everything spilled (16,398-16,493 bytes), and plan left AWS out."""
    for os_name in S.OS_NAMES:
        lp = S.with_os(S.loaded(path), os_name)
        lp = S.data_native_to(lp, "aws") if s3 else lp
        lc = lp.profile.lifecycle.model_copy(update={"on_idle": "delete", "on_max_run": "stop",
                                                     "max_run_hours": lp.profile.lifecycle.max_run_hours or 24})
        prof = lp.profile.model_copy(update={"lifecycle": lc})
        lp = dataclasses.replace(lp, profile=prof, hash=profile_hash(prof))
        rendered = S.render(lp, "aws")
        assert rendered.entry == "aws-gzip" and rendered.sizes["user_data"] <= AWS_USER_DATA_LIMIT
        least, tags = fully_spilled(lp, S.target_for("aws", lp))
        assert tags <= cloud("aws").user_data.spill_tags
        assert AWS_USER_DATA_LIMIT - least >= AWS_RESERVE_MIXED, f"{path.stem} on {os_name}: {least:,} bytes"


def test_config_values_are_never_compacted(tmp_path):
    """Multi-line profile values (the lock file, env values) that look like comments, heredoc
    starts or Python stay byte for byte: compaction finds the configuration block by position."""
    lock = tmp_path / "requirements.lock"
    lock.write_text("".join(f"{t}\n" for t in TRAPS) + f"torch==2.4.1+cu124 \\\n    --hash=sha256:{'a' * 64}\n")
    prof = S.minimal_profile(requirements="requirements.lock", env={"A": "x  # not a comment"})
    lp = S.from_dict(prof, path=tmp_path / "p.yaml", requirements=lock)
    rendered = S.render(lp, "aws")
    ctx = build_context(lp, S.target_for("aws", lp))
    head, config, body = _render_parts(ctx)
    assert shq(lock.read_text()) in config and config in rendered.startup_sh
    assert rendered.startup_sh == compact_script(head, config, body, keep=frozenset())
    assert hashlib.sha256(lock.read_bytes()).hexdigest() in rendered.startup_sh
    # the old marker search stopped at the first "# ---- paths:" line, here inside the lock file
    assert rendered.startup_sh.count("# ---- paths: x") == 1
    assert "TV_PACKAGES" in rendered.startup_sh and "tv_main()" in rendered.startup_sh
    assert json.loads(ctx.expected_json)["env"]["A"] == "x  # not a comment"


def test_compacted_script_is_the_same_program_smaller():
    lp = S.loaded(S.GOLDEN_PROFILE)
    full = render_script(lp, S.target_for("aws", lp), compact=False, script_url="https://example.com/s.sh").startup_sh
    small = S.render(lp, "aws").startup_sh
    assert len(gzip.compress(small.encode())) < len(gzip.compress(full.encode()))
    # the same shell functions, in the same order
    def functions(text):
        return re.findall(r"^\s*([A-Za-z_]+)\(\) \{", text, re.M)

    assert functions(small) == functions(full) and len(functions(full)) > 40


def test_minify_python_keeps_the_syntax_tree():
    src = '#!/usr/bin/env python3\n"""Module doc."""\nimport os  # comment\n\n\ndef f(a):\n    """Doc."""\n    # note\n    s = """two\n    lines"""\n    return {"k": a, "s": s}\n\n\nclass C:\n    """Only a docstring."""\n'
    out = minify_python(src)
    assert out.startswith("#!/usr/bin/env python3\n") and "Doc" not in out and "comment" not in out
    ns: dict = {}
    exec(compile(out, "m", "exec"), ns)
    assert ns["f"](1) == {"k": 1, "s": "two\n    lines"}
    assert minify_python("def broken(:\n") == "def broken(:\n"


def test_compact_shell_keeps_other_heredocs_and_minifies_python():
    text = "#!/bin/bash\n# comment\nf() {  # doc\n  cat <<'TRAINVM_X'\n  # kept\nTRAINVM_X\n  python3 - <<'TRAINVM_Y_PY'\n# gone\nx = 1  # gone\nTRAINVM_Y_PY\n}\n"
    out = compact_shell(text)
    assert out == "#!/bin/bash\nf() {\ncat <<'TRAINVM_X'\n  # kept\nTRAINVM_X\npython3 - <<'TRAINVM_Y_PY'\nx = 1\nTRAINVM_Y_PY\n}"
    ast.parse("x = 1")


@pytest.mark.parametrize("env", [{}, {"T": "secret://gcp/t"}, {"T": "secret://azure-keyvault/v/t", "U": "secret://aws/u"}])
def test_pruned_helper_defines_every_function_it_uses(env):
    """Only the unused secret_KIND readers go: every top-level function of the helper that the
    compacted helper still names is still defined (a pruned one would be a NameError on the VM)."""
    full = (S.REPO / "templates/files/trainvm_helper.py").read_text()
    functions = {n.name for n in ast.parse(full).body if isinstance(n, ast.FunctionDef)}
    script = S.render(S.from_dict(S.minimal_profile(env=env), validate=False), "aws").startup_sh
    tree = ast.parse(script.split("<<'TRAINVM_HELPER_PY'\n", 1)[1].split("\nTRAINVM_HELPER_PY\n", 1)[0])
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert (used & functions) <= defined
    kinds = {v.split("/")[2].replace("-", "_") for v in env.values()}
    assert {f for f in defined if f.startswith("secret_")} == {"secret_" + k for k in kinds}
    # gone: the dynamic functions not needed, and the plumbing only the secret readers use
    assert functions - defined <= {f for f in functions if f.startswith(DYNAMIC_PREFIXES)} | {"http", "aws_role", "aws_curl"}
    assert ("http" in defined) == bool(kinds) and ("aws_curl" in defined) == ("aws_role" in defined) == ("aws" in kinds)


@pytest.mark.parametrize("name", ["trainvm_helper.py", "trainvm_copy.py"])
@pytest.mark.parametrize("keep", [frozenset(), frozenset({"secret_aws", "cred_file", "cred_hidden", "scheme_s3"}), frozenset({"api_aws"})])
def test_pruned_embedded_python_defines_every_name_it_uses(tmp_path, name, keep):
    """Pruning drops the functions named with a dynamic prefix (secret_, cred_, api_, scheme_) that the profile does
    not need; what stays must not call one of them by name (a NameError on the VM), e.g. an ordinary
    function that happened to start with a dynamic prefix."""
    out = tmp_path / name
    out.write_text(minify_python((S.REPO / "templates/files" / name).read_text(), keep))
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    proc = subprocess.run([ruff, "check", "--no-cache", "--isolated", "--select", "F821", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
