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
    plan = make_plan(load_profile(T4), Overrides(("gcp",), None, None)).plan
    assert plan.chosen is not None and plan.failover
    calls: list[str] = []
    real = core.cost_of

    def counted(offer, **kw):  # type: ignore[no-untyped-def]
        calls.append(offer.zone)
        return real(offer, **kw)

    monkeypatch.setattr(core, "cost_of", counted)
    first, other = plan.chosen, plan.failover[0]
    a, b, c = plan.cost(first), plan.cost(other), plan.cost(first)
    assert a is c and b is not a
    assert calls == [first.zone, other.zone]
    spot = dataclasses.replace(plan, request=dataclasses.replace(plan.request, spot=True))
    assert spot.cost(first) != a and len(calls) == 3  # its own request: its own cost
