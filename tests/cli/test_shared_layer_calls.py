"""Issue 26: the shared providers layer (the modules directly in provisioner/providers/: registry, access, placement,
store...) is what every stage reads; during an `up` it never calls up into the catalog (bench/walk.py counted
``providers.access -> catalog.models`` once per offer of the plan: 171 calls for the T4 profile). Counted with
``sys.setprofile`` through the CLI (fake providers, tests/cli/conftest.py; the real planner, render and catalog)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import provisioner
from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
ROOT = Path(provisioner.__file__).parent


def _shared(path: str) -> bool:
    p = Path(path)
    return p.parent == ROOT / "providers"


def _calls_during_up(cli, callee: tuple[str, ...], caller: Callable[[str], bool],  # type: ignore[no-untyped-def]
                     handed: tuple[str, ...] = (), immediate: bool = False) -> Counter[str]:
    """``caller-module -> callee qualname`` counts of the calls made during a GCE `up` of the T4 profile into a file
    under one of the ``callee`` folders from a provisioner frame whose file ``caller`` accepts (the nearest provisioner
    frame: a comprehension's frame is the module's own; ``immediate``: the frame right below, so that a test's fake
    provider is its own caller), except callees whose qualname starts with ``handed``."""
    calls: Counter[str] = Counter()

    def hook(frame, event, arg):  # type: ignore[no-untyped-def]
        if event != "call" or not frame.f_code.co_filename.startswith(callee):
            return
        back = frame.f_back
        while not immediate and back is not None and not back.f_code.co_filename.startswith(str(ROOT)):
            back = back.f_back
        if back is not None and caller(back.f_code.co_filename) and not frame.f_code.co_qualname.startswith(handed):
            calls[f"{Path(back.f_code.co_filename).stem} -> {frame.f_code.co_qualname}"] += 1

    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        doc = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()
    finally:
        sys.setprofile(old)
    assert doc["attempts"][-1]["outcome"] == "created", doc
    return calls


def test_up_never_calls_from_the_shared_providers_layer_into_the_catalog(cli, clouds) -> None:
    assert not _calls_during_up(cli, (str(ROOT / "catalog"),), _shared)


def test_up_the_provision_stage_calls_back_into_no_stage_before_it(cli, clouds) -> None:
    """Issue 37 (the walk through `up`): render comes before provision in the stage order, and so do the plan and the
    catalog. `up` renders each offer it tries and hands the render, the plan's price and cost to provision/launch.py;
    provision calls none of them back (it rendered through ``render_for_offer``, computed the disks' cost again with
    catalog/costs.py and asked the plan for each offer's price: ``provision -> render/planner/catalog``). Reading the
    records those stages handed down (``RenderedScript``'s bootstrap for the staged payload, ``Cost``'s sums) is not a
    call back into a stage."""
    above = tuple(str(ROOT / pkg) for pkg in ("render", "planner", "catalog"))
    provision_dir = str(ROOT / "provision")
    assert not _calls_during_up(cli, above, lambda path: path.startswith(provision_dir), ("RenderedScript.", "Cost."))


def test_up_reads_the_plans_figures_without_calling_the_planner_back(cli, clouds) -> None:
    """Issue 37 (the walk through `up`: <= 20 stays): the planner computes the figures of the offers `up` may try once
    (``Plan.candidates``: price that applies, running price, cost with the disks, the machine; ``Plan.worst_case``).
    After ``make_plan`` the command and the provision stage read them as fields: the summary asked ``Plan.price`` /
    ``Plan.cost`` / ``failover_worst_case`` and ``Offer.location``, failover and launch_spec
    ``Offer.price_that_applies`` / ``Offer.location``, `up` ``Offer.provisionable`` per offer, the launch the plan's
    cost again: each a call back into planner/core.py, catalog/ or providers/offer.py."""
    back = (str(ROOT / "planner"), str(ROOT / "catalog"), str(ROOT / "providers" / "offer.py"))
    below = tuple(str(ROOT / pkg) for pkg in ("commands", "provision"))
    assert not _calls_during_up(cli, back, lambda path: path.startswith(below), ("make_plan", "Cost."), immediate=True)
