"""Issue 37: ``up`` asks ``BakedImages.choose`` for the first offer twice (its summary, then the attempt); the
offer's stack identity (``offer_stack``: render's ``stack_fields`` over the record) is computed once per offer, not
once per question (it was computed before the cache lookup, on every call)."""

from __future__ import annotations

from provisioner.bake import use
from provisioner.profile import load_profile
from tests.contract.clouds_fake import gce_offer
from tests.helpers import REPO

TF = REPO / "profiles" / "examples" / "tf-resnet50.yaml"  # a committed, fresh lock: exact, so it can be baked


def test_an_offers_stack_is_computed_once_however_often_up_asks(monkeypatch) -> None:
    loaded = load_profile(TF)
    stacks: list[str] = []
    real = use.offer_stack

    def counted(loaded, offer):  # type: ignore[no-untyped-def]
        stacks.append(offer.zone)
        return real(loaded, offer)

    monkeypatch.setattr(use, "offer_stack", counted)
    monkeypatch.setattr(use, "bakers", lambda: {"gcp": "unused"})
    monkeypatch.setattr(use.BakedImages, "_find", lambda self, cloud, stack, lock: use.BakedChoice(cloud, reason="none"))
    baked = use.BakedImages(loaded, {"gcp": object()})  # type: ignore[dict-item]
    assert baked._not_exact is None, baked._not_exact
    first, other = gce_offer("us-central1-a"), gce_offer("europe-west4-a")
    choices = [baked.choose(first), baked.choose(first), baked.choose(other), baked.choose(first)]
    assert stacks == ["us-central1-a", "europe-west4-a"]  # once per offer
    assert choices[0] == choices[1] == choices[3] and choices[0] is not None and choices[0].reason == "none"
