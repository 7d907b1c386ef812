"""Issue 10: AWS scripts with s3:// data spill embedded files into instance tags (provisioner/render/spill.py).
Under the stub harness, the curl stub serves the tags as EC2's IMDSv2 would (``STUB_EC2_TAGS``: one file per
tag); the script rebuilds each spilled file byte for byte and checks its sha256 before anything uses it, and a
changed or missing tag stops it with ``failed:spill`` before anything is installed.

Not modelled: the IMDS token's lifetime and IMDS's own answer to a missing tag (a 404, as the stub answers)."""

from __future__ import annotations

import dataclasses
import hashlib
import re

import pytest
import trainvm_render_support as S

from provisioner.providers import registry
from provisioner.render.spill import SPILLABLE, combined_sha256, heredocs, unspill


def bert_s3(os_name: str = "ubuntu-22.04"):
    return S.data_native_to(S.with_os(S.loaded(S.REPO / "profiles/examples/bert-finetune-t4.yaml"), os_name), "aws")


@pytest.fixture
def tight_aws(monkeypatch):
    """AWS with a smaller user-data limit, so that every spillable file of a small profile is spilled (the same
    code path as a large profile at 16,384 bytes)."""
    from provisioner.render import script

    def limit(n: int) -> None:
        aws = registry.CLOUDS["aws"]
        tight = dataclasses.replace(aws, user_data=dataclasses.replace(aws.user_data, limit=n))
        monkeypatch.setattr(script, "CLOUDS", {**registry.CLOUDS, "aws": tight})
    return limit


def tags_dir(tmp_path, rendered, change: str = "", drop: str = ""):
    d = tmp_path / "ec2-tags"
    d.mkdir()
    for key, value in rendered.spill_tags():
        if key == drop:
            continue
        if key == change:  # another valid base64 character in the middle: still decodes, other content
            i = len(value) // 2
            value = value[:i] + ("A" if value[i] != "A" else "B") + value[i + 1:]
        (d / key).write_text(value)
    return str(d)


def _full(lp):
    """The compacted script as it is without spilling (what the spilled heredocs must come back as)."""
    from provisioner.render.context import build_context
    from provisioner.render.script import _render_parts, compact_script, python_keep

    ctx = build_context(lp, S.target_for("aws", lp))
    return compact_script(*_render_parts(ctx), keep=python_keep(ctx))


def smallest(lp) -> int:
    """The gzip size of ``lp``'s AWS script with every spillable heredoc spilled."""
    import gzip

    from provisioner.render.context import build_context
    from provisioner.render.script import _render_parts, compact_script, python_keep
    from provisioner.render.spill import replace_heredocs, spilled_file

    ctx = build_context(lp, S.target_for("aws", lp))
    files = tuple(spilled_file(n, i, c) for i, (n, c) in enumerate(heredocs(_full(lp)).items()))
    script = replace_heredocs(compact_script(*_render_parts(ctx, files), keep=python_keep(ctx)), files)
    return len(gzip.compress(script.encode(), 9, mtime=0))


def overfull(lp, tight_aws) -> None:
    """AWS with 1 byte less room than ``lp``'s script needs unspilled (since the probe moved to the agent, the
    bundled profile with s3:// data fits 16,384 bytes; the spill is exercised as if it did not)."""
    tight_aws(S.render(lp, "aws").sizes["user_data"] - 1)


def test_bundled_profile_with_s3_data_spills_and_its_files_come_back_byte_for_byte(make_harness, tmp_path, tight_aws):
    lp = bert_s3()
    overfull(lp, tight_aws)
    rendered = S.render(lp, "aws")
    assert rendered.entry == "aws-gzip" and rendered.spilled
    names = [f.name for f in rendered.spilled]
    assert "TRAINVM_COPY_PY" in names
    for f in rendered.spilled:  # each heredoc is gone from the script; only the sha256 of all of them stays
        assert f"<<'{f.name}'" not in rendered.startup_sh and f"<\"$TV_STATE/spill/{f.name}\"" in rendered.startup_sh
    line = "tv_unspill '" + combined_sha256(rendered.spilled) + "' " + " ".join(f"'{f.name}:{f.index}:{len(f.tags)}'"
                                                                              for f in rendered.spilled)
    assert line in rendered.startup_sh.splitlines()
    full = heredocs(_full(lp))
    tags = dict(rendered.spill_tags())
    assert all(unspill(tags, f).decode() == full[f.name] for f in rendered.spilled)

    h = make_harness(rendered.startup_sh, cloud="aws", STUB_EC2_TAGS=tags_dir(tmp_path, rendered))
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    for f in rendered.spilled:
        assert h.path(f"/var/lib/trainvm/spill/{f.name}").read_text() == full[f.name]
    assert h.path("/var/lib/trainvm/lib/trainvm_copy.py").read_text() == full["TRAINVM_COPY_PY"]
    assert h.path("/mnt/data/glue").exists()
    reads = [c for c in run.lines("curl") if "/tags/instance/" in c]
    assert len(reads) == len(rendered.spill_tags())
    # a re-run (trainvm-provision.service after a reboot): the files are there with their sha256, no tag is read
    h.reboot()
    again = h.run()
    assert again.status == "ready" and not [c for c in again.lines("curl") if "/tags/instance/" in c]


def test_every_spillable_file_comes_back_and_the_lock_installs(make_harness, tmp_path, tight_aws):
    """With less room, the lock, the copier, the watchdog and the lifecycle script all go to tags."""
    lp = bert_s3()
    room = smallest(lp) + 16  # the order of the tv_unspill lines may cost a few bytes more; one file less far more
    tight_aws(room)
    rendered = S.render(lp, "aws")
    names = {f.name for f in rendered.spilled}
    assert names == {"TRAINVM_COPY_PY", "TRAINVM_LOCK_S3", "TRAINVM_WATCHDOG_SH", "TRAINVM_LIFECYCLE_SH"}
    assert rendered.sizes["user_data"] <= room
    h = make_harness(rendered.startup_sh, cloud="aws", STUB_EC2_TAGS=tags_dir(tmp_path, rendered))
    run = h.run()
    assert run.status == "ready", run.output[-3000:]
    full = heredocs(_full(lp))
    lock = h.path("/var/lib/trainvm/datatools-s3.txt").read_text()
    assert lock == full["TRAINVM_LOCK_S3"] == (S.REPO / "templates/datatools/s3-ubuntu-22.04.txt").read_text().split("\n", 1)[1]
    assert h.path("/opt/trainvm/datatools/s3/.trainvm-lock").read_text().strip() == hashlib.sha256(lock.encode()).hexdigest()
    assert h.path("/usr/local/sbin/trainvm-idle-watchdog").read_text() == full["TRAINVM_WATCHDOG_SH"]
    assert h.path("/usr/local/sbin/trainvm-lifecycle").read_text() == full["TRAINVM_LIFECYCLE_SH"]


@pytest.mark.parametrize("how", ["change", "drop"])
def test_a_changed_or_missing_tag_stops_the_script_before_anything_runs(make_harness, tmp_path, how, tight_aws):
    overfull(bert_s3(), tight_aws)
    rendered = S.render(bert_s3(), "aws")
    victim = rendered.spilled[0].tags[1][0]
    h = make_harness(rendered.startup_sh, cloud="aws",
                     STUB_EC2_TAGS=tags_dir(tmp_path, rendered, **{how: victim}))
    run = h.run()
    assert re.fullmatch(r"failed:spill:\d+", run.status), run.output[-3000:]
    assert run.statuses[:1] == [run.status]  # no phase started
    assert run.installs() == [] and not run.named("apt-get") and not run.named("uv")
    assert not h.path(f"/var/lib/trainvm/spill/{rendered.spilled[0].name}").exists()
    assert not h.path("/var/lib/trainvm/lib/trainvm_copy.py").exists()
    names = " ".join(f.name for f in rendered.spilled)
    assert f"instance tags tv-f* do not hold {names} (sha256 {combined_sha256(rendered.spilled)})" in run.report["error"]
    # a tag not (yet) in IMDS, or changed while it is being written, is read again: 30 tries
    assert len([c for c in run.lines("curl") if c.endswith(f"/tags/instance/{victim}")]) == 30


def test_a_profile_that_fits_spills_nothing():
    for path in S.EXAMPLES:
        rendered = S.render(S.loaded(path), "aws")
        assert rendered.spilled == () and "tv_unspill" not in rendered.startup_sh and "/spill/" not in rendered.startup_sh


def test_spillable_heredocs_hold_repository_files_only():
    """No profile value (and so no secret) can reach a spilled file: in the templates, each spillable heredoc's
    body is an include of a repository file, or a data-tool lock (templates/datatools, through ctx.datatools)."""
    bodies = {}
    for tmpl in (S.REPO / "templates").rglob("*.j2"):
        text = tmpl.read_text()
        for name in SPILLABLE:
            for m in re.finditer(rf"<<'{name}'\n(.*?)\n{name}\n", text, re.S):
                bodies.setdefault(name, []).append(m.group(1))
        for m in re.finditer(r"<<'\{\{ t\.heredoc \}\}'\n(.*?)\{\{ t\.heredoc \}\}\n", text, re.S):
            bodies.setdefault("TRAINVM_LOCK", []).append(m.group(1))
    assert {"TRAINVM_COPY_PY", "TRAINVM_WATCHDOG_SH", "TRAINVM_LIFECYCLE_SH", "TRAINVM_LOCK"} <= set(bodies)
    for name, found in bodies.items():
        for body in found:
            assert re.fullmatch(r'\{% include "files/[^"]+"( \+ ctx\.cloud \+ "[^"]+")? %\}|\{\{ t\.lock \}\}', body.strip()), (name, body)
