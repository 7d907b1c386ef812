"""A rehearsal target (``RenderTarget.rehearsal``: a cloud whose ``CloudSpec.rehearsal`` is true, the profile's GPU
asked for on a machine without one; ``target_from_offer(offer, rehearse=(GPU, count))``) reaches the script:
``ScriptContext.rehearsal``, ``TV_REHEARSAL`` in the config, expected.json's ``rehearsal`` and the rehearsal's GPU
gate; a target without it renders none of them."""

from __future__ import annotations

import json
import re

import trainvm_render_support as S

from provisioner.providers.offer import Offer
from provisioner.render import script_context as sc
from provisioner.render.context import build_context
from provisioner.render.script import render_script

PROFILE = S.REPO / "profiles/examples/bert-finetune-t4.yaml"


def _offer() -> Offer:
    return Offer(cloud="gcp", instance_type="n1-standard-8", family="n1", gpu_name="T4", gpu_count=1, gpu_memory_gib=16,
                 vcpus=8, memory_gib=30, region="us-central1", zone="us-central1-a", price_hourly=0.7,
                 spot_price_hourly=None, gpu_attach="attachable", disk_types=("ssd",), local_nvme_max_gib=0, arch="x86_64")


def test_a_rehearsal_target_renders_a_rehearsal(tmp_path) -> None:
    target = sc.target_from_offer(_offer(), ("T4", 1))
    assert target.rehearsal is True and (target.gpu_name, target.gpu_count) == ("T4", 1)
    lp = S.data_native_to(S.loaded(PROFILE), "gcp")
    ctx = build_context(lp, target)
    assert ctx.rehearsal is True and json.loads(ctx.expected_json)["rehearsal"] is True
    script = render_script(lp, target).startup_sh
    assert re.search(r"^TV_REHEARSAL=1 ", script, re.M)
    assert "rehearsal: no GPU; not checked:" in script and "modinfo -F vermagic nvidia" in script
    (tmp_path / "startup.sh").write_text(script)
    assert S.shellcheck([tmp_path / "startup.sh"]) == {}


def test_a_target_without_it_renders_no_rehearsal() -> None:
    target = sc.target_from_offer(_offer())
    assert target.rehearsal is False
    lp = S.data_native_to(S.loaded(PROFILE), "gcp")
    assert json.loads(build_context(lp, target).expected_json)["rehearsal"] is False
    script = render_script(lp, target).startup_sh
    assert re.search(r"^TV_REHEARSAL=0 ", script, re.M) and "rehearsal: no GPU; not checked" not in script
