"""Issue 37 (the walk through `up`): an offer's cost under a plan (``Plan.cost``: compute + the request's disks) is
computed once per plan; `up` asks for its first offer's in the summary and again for the attempt's labels, where it
went back to catalog/costs.py each time. A copy of the plan with another request (``dataclasses.replace``) computes
its own."""

from __future__ import annotations

import dataclasses

from provisioner.planner import core
from provisioner.planner.from_profile import Overrides, make_plan
from provisioner.profile import load_profile
from tests.helpers import REPO

T4 = REPO / "profiles" / "examples" / "bert-finetune-t4.yaml"


def test_an_offers_cost_is_computed_once_per_plan(monkeypatch) -> None:
    loaded = load_profile(T4)
    calls: list[tuple[str, str, str]] = []
    real = core.cost_of

    def counted(offer, **kw):  # type: ignore[no-untyped-def]
        calls.append((offer.region, offer.instance_type, offer.zone))
        return real(offer, **kw)

    monkeypatch.setattr(core, "cost_of", counted)
    plan = make_plan(loaded, Overrides(("gcp",), None, None)).plan
    assert plan.chosen is not None and plan.failover
    tried = [plan.chosen, *plan.failover]
    # plan() prices the disks of each machine the offers `up` may try run on once (zones of a region share them)
    machines = {(o.region, o.instance_type) for o in tried}
    priced = [(r, t) for r, t, _ in calls if (r, t) in machines]
    assert sorted(priced) == sorted(machines) and len(machines) < len(tried)
    calls.clear()
    first, other = plan.chosen, plan.failover[0]
    a, b, c = plan.cost(first), plan.cost(other), plan.cost(first)
    assert a is c and b is not a and a is plan.candidates[0].cost
    assert calls == []  # asking for a candidate's cost computes nothing
    spot = dataclasses.replace(plan, request=dataclasses.replace(plan.request, spot=True))
    assert spot.cost(first) != a and len(calls) == 1  # its own request: its own cost


def test_the_candidates_figures_are_the_plans() -> None:
    """``Plan.candidates``: the chosen offer and the failover order, each with the price, running price and cost the
    plan's methods give (what `up` reads as fields instead of calling back)."""
    plan = make_plan(load_profile(T4), Overrides(("gcp",), None, None)).plan
    assert [c.offer for c in plan.candidates] == [plan.chosen, *plan.failover]
    fresh = dataclasses.replace(plan, candidates=())  # a plan without them computes each figure on demand
    for c in plan.candidates:
        assert c.price == fresh.price(c.offer) and c.running == fresh.running_price(c.offer)
        assert c.cost == fresh.cost(c.offer)
        assert c.shape.location == c.offer.location and c.shape.region == c.offer.region
        assert (c.shape.family, c.shape.vcpus, c.shape.gpu_count) == (c.offer.family, c.offer.vcpus, c.offer.gpu_count)
    assert plan.worst_case == max(fresh.running_price(o) for o in (plan.chosen, *plan.failover))
