"""Issue 26: the planner's constraints are one list (planner/checks.py). A check added to it is applied by
``plan`` (the `plan` command's chosen offer and rejection counts) and by ``diagnose`` (the explanations), with
no second copy to keep in step."""

from __future__ import annotations

import dataclasses

from provisioner.planner import checks
from provisioner.planner.checks import CHECKS, Check
from provisioner.planner.request import REASONS
from tests.helpers import EXAMPLES


def test_reasons_are_the_check_list() -> None:
    assert REASONS == tuple(c.reason for c in CHECKS)
    assert len(set(REASONS)) == len(REASONS)


def test_a_check_added_to_the_list_is_seen_by_plan_and_diagnose(cli, monkeypatch) -> None:
    from provisioner.planner import diagnose
    from provisioner.planner.from_profile import build_request
    from provisioner.profile import load_profile

    before = cli("plan", str(EXAMPLES[0]), "--json").json()
    banned = before["chosen"]["instance_type"]
    extra = Check("test_banned_shape", lambda req, ck: (lambda o: o.instance_type == banned), "a test's constraint")
    monkeypatch.setattr(checks, "CHECKS", (*CHECKS, extra))

    after = cli("plan", str(EXAMPLES[0]), "--json").json()
    assert after["chosen"]["instance_type"] != banned
    counted = sum(r.get("test_banned_shape", 0) for r in after["rejected"].values())
    assert counted > 0, after["rejected"]

    request, _ = build_request(load_profile(EXAMPLES[0]))
    from provisioner.catalog.storage import load_catalog

    offer = next(o for o in load_catalog().offers if o.instance_type == banned)
    assert "test_banned_shape" in diagnose(offer, request)
    assert "test_banned_shape" not in diagnose(dataclasses.replace(offer, instance_type="x-other"), request)


def test_plan_and_diagnose_agree_on_every_offer() -> None:
    """The first reason ``plan`` counts an offer under is diagnose()'s first, and feasible offers have none."""
    from datetime import date

    from provisioner.catalog.storage import load_catalog
    from provisioner.planner import PlanRequest, diagnose, plan

    catalog = load_catalog()
    for req in (PlanRequest(gpu_names=frozenset({"T4"}), min_vcpus=4, spot=True, max_price_per_hour=1.0),
                PlanRequest(region_globs=("us-*",), local_nvme_gib=100, nodes=2, gpu_count=8)):
        p = plan(req, catalog, date(2026, 11, 22))
        counts: dict[str, dict[str, int]] = {}
        for o in catalog.offers:
            why = diagnose(o, req)
            if why:
                counts.setdefault(o.cloud, {}).setdefault(why[0], 0)
                counts[o.cloud][why[0]] += 1
        # the running-price cap (disks included) moves some offers the loop admitted to max_price afterwards
        feasible_by_compute = {id(o) for o in catalog.offers if not diagnose(o, req)}
        assert {id(o) for o in p.ranked} <= feasible_by_compute
        if req.max_price_per_hour is None:
            assert p.rejected == {c: {r: counts[c][r] for r in REASONS if r in counts[c]} for c in sorted(counts)}
