"""Issue 26: `up` renders the payload at most once per offer it tries (a render is ~0.1 s of CPU, and `plan` before
it renders nothing). Fake providers (tests/cli/conftest.py), the real render."""

from __future__ import annotations

from provisioner.providers.base import CapacityError
from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


def test_up_renders_once_per_offer_tried(cli, clouds, monkeypatch) -> None:
    import provisioner.render.script as script

    real = script.render_script
    rendered: list[tuple[str, str, str | None]] = []

    def counting(loaded, target, **kw):  # type: ignore[no-untyped-def]
        rendered.append((target.cloud, target.instance_type, target.zone or target.region))
        return real(loaded, target, **kw)

    monkeypatch.setattr(script, "render_script", counting)
    for zone in ("us-central1-a", "us-central1-b"):
        clouds["gcp"].fail(zone, *[CapacityError("stockout", code="ZONE_RESOURCE_POOL_EXHAUSTED")] * 10)
    doc = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()
    tried = [(a["cloud"], a["instance_type"], a.get("zone") or a.get("region")) for a in doc["attempts"]]
    assert len(tried) >= 3 and doc["attempts"][-1]["outcome"] == "created"
    assert sorted(rendered) == sorted(set(tried)), (rendered, tried)
