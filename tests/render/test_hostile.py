"""Hostile profile strings: every string field that survives validation is quoted by shq, so a
render stays shellcheck-clean and executing it never runs the payload.

The payloads try to run ``pwned``, a stub on PATH that records any call (tests/stubharness/bin).
Only the rendered configuration block carries profile values (checked: the rest of the script
is byte-identical to a benign render), so each hypothesis example is (1) sourced in bash with
the canary on PATH and read back value by value, (2) shellchecked (all examples' blocks in one
run), and a few are executed end to end in the stub harness.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import trainvm_render_support as S
import trainvm_stubharness as H
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from provisioner.errors import RenderError
from provisioner.profile.fields import URL_SAFE_RE
from provisioner.render import build_context, render_script
from provisioner.render.payload import unpack
from provisioner.render.script import _render

PAYLOADS = [
    "$(pwned)", "`pwned`", "'; pwned; '", '"; pwned; "', "$(pwned)'", "\\'$(pwned)", "';pwned;'", "${IFS}pwned",
    "a\\$(pwned)", "$'\\x27'$(pwned)", "' \"$(pwned)\" '", ";pwned", "&& pwned", "| pwned", "> /tmp/x; pwned",
    "TRAINVM_HELPER_PY", "EOF", "'\"'\"'$(pwned)", "\u2028$(pwned)", "\u00a0$(pwned)", "$((1/0))",
]
URL_PAYLOADS = ["$(pwned)", "';pwned;'", ";pwned", "&&pwned", "$(pwned)'", "'$(pwned)'", "*", "?x=$(pwned)", "#$(pwned)"]
CONFIG_END = "# ---- paths:"
READBACK = r"""
set -Eeuo pipefail
source "$1" >/dev/null 2>&1 || { echo "config block failed" >&2; exit 3; }
out() { printf '%s\0' "$@"; }
out PROFILE "$TV_PROFILE" EXPECTED "$TV_EXPECTED" LOCK "$TV_LOCK" ZONE "$TV_ZONE"
out PACKAGES "${#TV_PACKAGES[@]}" "${TV_PACKAGES[@]}"
out SRC "${#TV_DATA_SRC[@]}" "${TV_DATA_SRC[@]}" DEST "${#TV_DATA_DEST[@]}" "${TV_DATA_DEST[@]}"
out NAME "${#TV_DATA_NAME[@]}" "${TV_DATA_NAME[@]}"
"""


def _split(script: str) -> tuple[str, str]:
    head, sep, tail = script.partition(CONFIG_END)
    assert sep
    return head, sep + tail


def _readback(block_path, canary_state) -> list[str]:
    """Source the block in bash with the canary on PATH; the values it defines, NUL-separated."""
    env = {"PATH": f"{H.BIN}:/usr/bin:/bin", "STUB_STATE": str(canary_state), "STUB_LIB": str(H.HERE / "lib.sh")}
    proc = subprocess.run(["bash", "-c", READBACK, "bash", str(block_path)], capture_output=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode("utf-8").split("\0")[:-1]


def _expected_readback(ctx) -> list[str]:
    out = ["PROFILE", ctx.profile_name, "EXPECTED", ctx.expected_json, "LOCK", ctx.lock_text, "ZONE", ctx.zone]
    out += ["PACKAGES", str(len(ctx.packages)), *ctx.packages]
    out += ["SRC", str(len(ctx.data)), *[d.source for d in ctx.data], "DEST", str(len(ctx.data)), *[d.dest for d in ctx.data]]
    out += ["NAME", str(len(ctx.data)), *[d.file_name for d in ctx.data]]
    return out


# ---------------------------------------------------------------------------- strategies
_text = st.text(st.characters(min_codepoint=32, blacklist_categories=("Cs",), blacklist_characters="\x7f"), max_size=24)
hostile = st.one_of(st.sampled_from(PAYLOADS), st.builds(lambda a, p, b: a + p + b, _text, st.sampled_from(PAYLOADS), _text), _text)
_url_chars = st.text(st.sampled_from(sorted(set("abcXYZ019._~:/?#[]@!$&'()*+,;=%-"))), max_size=16)
url_tail = st.one_of(st.builds(lambda a, p: a + p, _url_chars, st.sampled_from(URL_PAYLOADS)), _url_chars)
dest_tail = st.text(st.sampled_from(sorted(set("abc019._@+-"))), min_size=1, max_size=12).filter(lambda s: s not in (".", ".."))
env_key = st.sampled_from(["CUBLAS_WORKSPACE_CONFIG", "PYTHONHASHSEED", "NCCL_DEBUG", "MY_VAR", "_X1", "A"])


@st.composite
def hostile_profiles(draw):
    env = draw(st.dictionaries(env_key, hostile, max_size=4))
    n = draw(st.integers(0, 3))
    schemes = draw(st.lists(st.sampled_from(["gs://bkt/", "s3://bkt/", "az://acct/cont/", "https://example.com/"]), min_size=n, max_size=n))
    tails = draw(st.lists(url_tail, min_size=n, max_size=n))
    dests = draw(st.lists(dest_tail, min_size=n, max_size=n, unique=True))
    data = [{"source": s + t, "dest": "/mnt/data/" + d} for s, t, d in zip(schemes, tails, dests)]
    name = draw(st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True))
    extra = draw(st.sampled_from(["", "[x]", "[a,b]"]))
    prof = S.minimal_profile(env=env, packages=[f"torch{extra}==2.4.1+cu124", "transformers==4.44.2"])
    prof.update(name=name, data=data)
    prof["hardware"]["local_nvme_gib"] = draw(st.sampled_from([0, 375]))
    lock = draw(st.none() | st.lists(hostile, max_size=3))
    if lock is not None:  # a hashed lock file with hostile comment lines and a hostile pin line
        prof["stack"]["requirements"] = "requirements.lock"
        prof["_lock"] = "".join(f"# {line}\n" for line in lock) + "".join(f"{p} \\\n    --hash=sha256:{'a' * 64}\n" for p in prof["stack"]["packages"]) + "".join(lock)
    return prof


def _valid(prof, folder):
    if not all(URL_SAFE_RE.match(d["source"]) for d in prof["data"]):
        return None
    prof = dict(prof)
    lock_text, lock = prof.pop("_lock", None), None
    if lock_text is not None:
        lock = folder / "requirements.lock"
        lock.write_text(lock_text, encoding="utf-8")
    try:
        return S.from_dict(prof, path=folder / "p.yaml", requirements=lock)
    except ValidationError:
        return None


# ---------------------------------------------------------------------------- tests
def test_hostile_strings_are_inert_and_shellcheck_clean(tmp_path):
    blocks = []
    baselines = {}

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
              database=None)
    @given(hostile_profiles(), st.sampled_from(S.CLOUDS), st.sampled_from(S.OS_NAMES))
    def check(prof, cloud, os_name):
        lp = _valid(prof, tmp_path)
        assume(lp is not None)  # only profiles that survive validation count toward max_examples
        lp = S.with_os(lp, os_name)
        target = S.target_for(cloud, lp)
        ctx = build_context(lp, target)
        head, rest = _split(_render(ctx))
        # the body depends on which copy tools the data needs (its schemes), never on the values
        shape = (cloud, os_name, tuple(d.source.split("://", 1)[0] for d in lp.profile.data))
        if shape not in baselines:
            base = S.with_data_shape(S.with_os(S.loaded(S.GOLDEN_PROFILE), os_name), lp)
            baselines[shape] = _split(_render(build_context(base, S.target_for(cloud, base))))[1]
        assert rest == baselines[shape]  # profile values live only in the config block
        path = tmp_path / f"block{len(blocks)}.sh"
        path.write_text(head, encoding="utf-8")
        assert _readback(path, tmp_path) == _expected_readback(ctx)
        blocks.append(head)
        # the payload carries the exact script, and the bootstrap holds no profile value at all
        rendered = render_script(lp, S.target_for("azure", lp))
        assert unpack(rendered.payload.data)["startup.sh"].decode() == rendered.startup_sh
        boot = rendered.preview().text
        assert boot.isascii() and all(d.source not in boot for d in lp.profile.data)

    check()
    assert len(blocks) >= 10
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "calls.log").exists()
    # one shellcheck run over every example's configuration block
    every = "\n".join(blocks)  # the variables of every block (which ones exist depends on the data)
    uses = " ".join(f'"${{{v}}}"' for v in sorted(set(re.findall(r"^(TV_[A-Z0-9_]+)=(?!\()", every, re.M))))
    arrays = sorted(set(re.findall(r"^(?:declare -A )?(TV_[A-Z0-9_]+)=\(", every, re.M)))
    combined = tmp_path / "blocks.sh"
    combined.write_text("\n".join(b.replace("#!/bin/bash\n", "", 1) if i else b for i, b in enumerate(blocks))
                        + f"\n: {uses}\n" + "".join(f': "${{{a}[@]}}"\n' for a in arrays),
                        encoding="utf-8")
    assert S.shellcheck([combined]) == {}


FIXED = {
    "name": "pw-ned",
    "hardware": {"gpu": "T4", "gpu_count": 1},
    "stack": {"os": "ubuntu-22.04", "driver": "550.127.05", "cuda": "12.4", "python": "3.11.9",
              "packages": ["torch==2.4.1+cu124"],
              "env": {f"V{i}": p for i, p in enumerate(PAYLOADS)}},
    "data": [{"source": "gs://bkt/a$(pwned)';pwned;'/", "dest": "/mnt/data/a"},
             {"source": "s3://bkt/b;pwned&&pwned/", "dest": "/mnt/data/-b"},
             {"source": "az://acct/cont/c'$(pwned)'/", "dest": "/mnt/data/c@+"}],
}


@pytest.mark.parametrize("cloud", S.CLOUDS)
def test_fixed_payloads_execute_without_running_anything(make_harness, tmp_path, cloud):
    # each source moved to the cloud's own storage (keeping the hostile paths): the script copies them all
    lp = S.data_native_to(S.from_dict(json.loads(json.dumps(FIXED)), validate=False), cloud)
    rendered = S.render(lp, cloud)
    (tmp_path / "full.sh").write_text(rendered.startup_sh)
    assert S.shellcheck([tmp_path / "full.sh"]) == {}
    h = make_harness(rendered.startup_sh, cloud=cloud)
    run = h.run()
    assert run.rc == 0 and run.status == "ready", run.output[-2000:]
    assert not run.named("pwned") and not h.pwned
    # the values arrive verbatim as single arguments
    listed = [c.args[2:] for c in run.named("sdk") if c.args[1] == "list"]  # (bucket, prefix) the copier asked the SDK for
    tails = [d.source.split("://", 1)[1] for d in lp.profile.data]
    if cloud == "azure":  # az://ACCOUNT/CONTAINER/PREFIX
        want = [["/".join(t.split("/", 2)[:2]), t.split("/", 2)[2]] for t in tails]
    else:
        want = [t.split("/", 1) for t in tails]
    assert listed == want and len(want) == 3 and all("pwned" in prefix for _, prefix in want)  # verbatim, as one argument
    values = H.env_file_values(h)
    for i, p in enumerate(PAYLOADS):
        assert values[f"V{i}"] == p
    assert not h.pwned  # sourcing /etc/trainvm/env ran nothing either


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(prof=hostile_profiles(), cloud=st.sampled_from(S.CLOUDS))
def test_hostile_render_runs_end_to_end_without_the_payload(tmp_path_factory, prof, cloud):
    folder = tmp_path_factory.mktemp("hostile")
    lp = _valid({**prof, "hardware": {**prof["hardware"], "local_nvme_gib": 0}}, folder)
    assume(lp is not None)  # the 4 examples are all profiles that survive validation
    if not H.Harness.available():
        pytest.skip("the stub harness needs bash and flock")
    lp = S.data_native_to(lp, cloud)  # a source the cloud cannot read stops the script at preflight
    try:
        rendered = S.render(lp, cloud)
    except RenderError as exc:
        # AWS user data is capped at 16 KB even gzipped; a long random profile may not fit. That is
        # the documented size refusal (tests/render/test_sizes.py), not what this test is about.
        assert "AWS user data" in str(exc), exc
        assume(False)
    h = H.Harness(folder, rendered.startup_sh, cloud=cloud)
    run = h.run()
    assert run.status == "ready", run.output[-2000:]
    assert not run.named("pwned") and not h.pwned
    values = H.env_file_values(h)
    assert {k: values[k] for k in prof["stack"]["env"]} == prof["stack"]["env"]
