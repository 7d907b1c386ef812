"""The rehearsal reaches the render from the offer's cloud spec (``CloudSpec.rehearsal`` -> ``RenderTarget.rehearsal``
-> ``ScriptContext.rehearsal``, ``TV_REHEARSAL`` and expected.json's ``rehearsal``), without a branch on any cloud's
name: no cloud has it on this branch, so a test's copy of the table turns it on for one."""

from __future__ import annotations

import dataclasses
import json
import re

import trainvm_render_support as S

from provisioner.providers.offer import Offer
from provisioner.render import script_context as sc
from provisioner.render.context import build_context
from provisioner.render.script import render_script


def _offer(cloud: str = "gcp") -> Offer:
    return Offer(cloud=cloud, instance_type="n1-standard-8", family="n1", gpu_name="T4", gpu_count=1, gpu_memory_gib=16,
                 vcpus=8, memory_gib=30, region="us-central1", zone="us-central1-a", price_hourly=0.7,
                 spot_price_hourly=None, gpu_attach="attachable", disk_types=("ssd",), local_nvme_max_gib=0, arch="x86_64")


def test_no_cloud_rehearses_on_this_branch() -> None:
    assert not any(spec.rehearsal for spec in sc.CLOUDS.values())
    assert sc.target_from_offer(_offer()).rehearsal is False


def test_a_rehearsal_cloud_renders_a_rehearsal(monkeypatch) -> None:
    monkeypatch.setattr(sc, "CLOUDS", {**sc.CLOUDS, "gcp": dataclasses.replace(sc.CLOUDS["gcp"], rehearsal=True)})
    target = sc.target_from_offer(_offer())
    assert target.rehearsal is True
    lp = S.data_native_to(S.loaded(S.REPO / "profiles/examples/bert-finetune-t4.yaml"), "gcp")
    ctx = build_context(lp, target)
    assert ctx.rehearsal is True and json.loads(ctx.expected_json)["rehearsal"] is True
    assert re.search(r"^TV_REHEARSAL=1 ", render_script(lp, target).startup_sh, re.M)
