"""A bake's stack identity from the record alone (render/context.py ``stack_fields``, issue 37): the same fields,
hash and lock sha256 as a whole rendered context gave (``image_identity.stack_fields(build_context(...))``), for every
example profile on every cloud and OS, and ``bake/use.py offer_stack`` renders nothing to get them."""

from __future__ import annotations

import dataclasses

import pytest
import trainvm_render_support as S

from provisioner.bake.use import offer_stack
from provisioner.catalog.models import Offer
from provisioner.errors import RenderError
from provisioner.profile.loader import LoadedProfile
from provisioner.providers import image_identity
from provisioner.render import RenderTarget, build_context, stack_fields, target_from_offer


def _offer(t: RenderTarget) -> Offer:
    return Offer(cloud=t.cloud, instance_type=t.instance_type, family="x", gpu_name=t.gpu_name, gpu_count=t.gpu_count,
                 gpu_memory_gib=16, vcpus=8, memory_gib=64, region=t.region, zone=t.zone, price_hourly=1.0,
                 spot_price_hourly=None, gpu_attach="bundled", disk_types=("ssd",), local_nvme_max_gib=t.local_nvme_gib,
                 arch="x86_64")


def _extras() -> list[tuple[str, LoadedProfile]]:
    """What the examples leave out: a CUDA toolkit with cuDNN 9 and 8, a VM that deletes itself (an API SDK venv)."""
    cudnn9 = S.minimal_profile(cuda_toolkit=True, cudnn="9.1.0")
    cudnn8 = S.minimal_profile(cuda_toolkit=True, cudnn="8.9.7", os="debian-12")
    deleting = S.minimal_profile()
    deleting["lifecycle"] = {"on_idle": "delete", "idle_shutdown_minutes": 30}
    deleting["data"] = [{"source": "s3://bkt/x/", "dest": "/mnt/data/x"}]
    return [("cudnn9", S.from_dict(cudnn9)), ("cudnn8", S.from_dict(cudnn8)), ("deleting", S.from_dict(deleting))]


def _cases() -> list[tuple[str, LoadedProfile, str]]:
    cases = []
    profiles = [(p.stem, S.loaded(p)) for p in S.EXAMPLES] + _extras()
    for name, lp in profiles:
        for cloud in S.CLOUDS:
            for variant in (lp, S.data_native_to(lp, cloud)):
                for os_name in S.OS_NAMES:
                    cases.append((f"{name}/{cloud}/{os_name}", S.with_os(variant, os_name), cloud))
    return cases


def _old_path(lp: LoadedProfile, offer: Offer) -> tuple[dict[str, object], str, str] | str:
    """What offer_stack computed before issue 37: a whole ScriptContext, hashed (or the RenderError it raised)."""
    try:
        ctx = build_context(lp, target_from_offer(offer), None, "")
    except RenderError as exc:
        return str(exc)
    return image_identity.stack_fields(ctx), image_identity.stack_hash(ctx), ctx.lock_sha256


def test_stack_fields_equal_the_rendered_contexts_for_every_example_cloud_and_os():
    compared = failed = 0
    for label, lp, cloud in _cases():
        offer = _offer(S.target_for(cloud, lp))
        old = _old_path(lp, offer)
        if isinstance(old, str):
            with pytest.raises(RenderError) as info:
                offer_stack(lp, offer)
            assert str(info.value) == old, label
            failed += 1
            continue
        fields, stack, lock = old
        assert stack_fields(lp, target_from_offer(offer)) == fields, label
        assert offer_stack(lp, offer) == (stack, lock), label
        compared += 1
    # the comparison is not vacuous: most cases render, and the hashes differ where the installed stack does
    assert compared >= 100


def test_the_compared_stacks_differ_where_the_install_does():
    lp = S.loaded(S.GOLDEN_PROFILE)
    base = offer_stack(lp, _offer(S.target_for("gcp", lp)))
    assert offer_stack(lp, _offer(S.target_for("azure", lp)))[0] != base[0]  # another kernel flavour
    assert offer_stack(S.with_os(lp, "debian-12"), _offer(S.target_for("gcp", lp)))[0] != base[0]
    locked = S.loaded(S.REPO / "profiles/examples/tf-resnet50.yaml")
    assert offer_stack(locked, _offer(S.target_for("gcp", locked)))[1] != ""  # its committed lock


def test_offer_stack_renders_nothing(monkeypatch):
    """No ScriptContext, no expectation, no container/cluster/perf part: only the install phases' values."""
    import provisioner.render as render_pkg
    import provisioner.render.context as context

    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("offer_stack must not build a whole script context")

    for module, name in ((render_pkg, "build_context"), (context, "build_context"), (context, "expectation"),
                         (context, "cluster_context"), (context, "ScriptContext")):
        monkeypatch.setattr(module, name, boom)
    lp = S.loaded(S.GOLDEN_PROFILE)
    stack, lock = offer_stack(lp, _offer(S.target_for("gcp", lp)))
    assert len(stack) == 32 and lock == ""
    assert dataclasses.is_dataclass(target_from_offer(_offer(S.target_for("gcp", lp))))
