"""bench/walk.py's counting (issue 26's walk of `up`) on synthetic call sequences: no timing is asserted, only
that stops, returns, climbs and package entries follow the definitions in its docstring."""

from __future__ import annotations

from bench.walk import CONTEXT_BUILDERS, COUNTED, CREATE_CALLER, Call, count, count_profile, layer_of

CLOUDS = ("gcp", "azure", "aws")
UP, LOADER, RESOLVED, STACK, CORE, SCRIPT, FAILOVER = (
    "provisioner.commands.up", "provisioner.profile.loader", "provisioner.profile.resolved", "provisioner.compat.stack",
    "provisioner.planner.core", "provisioner.render.script", "provisioner.provision.failover")
GCP, REGISTRY, ERRORS = "provisioner.providers.gcp.provider", "provisioner.providers.registry", "provisioner.errors"


def test_layers_follow_the_stage_table() -> None:
    order = [UP, LOADER, STACK, CORE, SCRIPT, FAILOVER, GCP, REGISTRY]
    assert [layer_of(m, CLOUDS) for m in order] == sorted(layer_of(m, CLOUDS) for m in order)
    assert len({layer_of(m, CLOUDS) for m in order}) == len(order)
    # the flat per-cloud modules of older revisions are the cloud's layer too; shared modules are below it
    assert layer_of("provisioner.providers.gcp_request", CLOUDS) == layer_of(GCP, CLOUDS)
    assert layer_of(ERRORS, CLOUDS) == layer_of(REGISTRY, CLOUDS) > layer_of(GCP, CLOUDS)
    assert layer_of("provisioner.providers.gcpx", CLOUDS) == layer_of(REGISTRY, CLOUDS)


def test_stops_returns_and_climbs_on_a_synthetic_walk() -> None:
    calls = [
        Call("provisioner.cli", UP, f"{UP}.run_up"),
        Call(UP, LOADER, f"{LOADER}.load_profile"),
        Call(LOADER, LOADER, f"{LOADER}._read"),             # same module: no new stop
        Call(LOADER, RESOLVED, f"{RESOLVED}.resolve"),
        Call(RESOLVED, STACK, f"{STACK}.effective_cuda"),
        Call(UP, CORE, f"{CORE}.plan"),
        Call(CORE, RESOLVED, f"{RESOLVED}.Resolved.gpus"),   # plan -> profile: a climb, a return to RESOLVED
        Call(CORE, ERRORS, f"{ERRORS}.InputError.__init__"),  # down to the shared layer: no climb
        Call(UP, FAILOVER, f"{FAILOVER}.provision"),
        Call(FAILOVER, SCRIPT, f"{SCRIPT}.render_script"),    # provision -> render: a climb by the table
        Call(FAILOVER, GCP, f"{GCP}.GcpProvider.create"),
        Call(GCP, REGISTRY, f"{REGISTRY}.cloud"),
        Call(REGISTRY, STACK, f"{STACK}.effective_cuda"),     # the shared layer calling up: a climb
        Call(None, UP, f"{UP}.helper"),                       # no provisioner caller: never a climb
    ]
    got = count(calls, CLOUDS)
    stops = [UP, LOADER, RESOLVED, STACK, CORE, RESOLVED, ERRORS, FAILOVER, SCRIPT, GCP, REGISTRY, STACK, UP]
    assert got["calls"] == len(calls)
    assert got["stops"] == len(stops) == 13
    assert got["modules"] == len(set(stops)) == 10
    assert got["returns"] == 3  # RESOLVED, STACK, UP entered again after being left
    assert got["climbs"] == 3
    assert got["climb_edges"] == {f"{CORE} -> {RESOLVED}": 1, f"{FAILOVER} -> {SCRIPT}": 1, f"{REGISTRY} -> {STACK}": 1}
    assert got["module_edges"] == 12
    # package runs along the stops: commands, profile, compat, planner, profile, errors, provision, render,
    # providers (gcp then registry: one run), compat, commands
    assert got["package_entries"] == {"commands": 2, "profile": 2, "compat": 2, "planner": 1, "errors": 1,
                                      "provision": 1, "render": 1, "providers": 1}
    assert got["climbing_edges"] == 3
    assert got["functions"] == {**dict.fromkeys(COUNTED, 0), "effective_cuda": 2}
    assert got["function_callers"] == {f"effective_cuda <- {RESOLVED}": 1, f"effective_cuda <- {REGISTRY}": 1}


def test_an_empty_walk_counts_nothing() -> None:
    got = count([], CLOUDS)
    assert (got["stops"], got["modules"], got["returns"], got["climbs"]) == (0, 0, 0, 0)


BAKE, LAUNCH, CONTEXT, COSTS = ("provisioner.bake.use", "provisioner.provision.launch", "provisioner.render.context",
                                "provisioner.catalog.costs")


def test_the_profile_walk_follows_only_the_calls_that_receive_the_records() -> None:
    calls = [
        Call("provisioner.cli", UP, f"{UP}.run_up"),                                # a path: not a record
        Call(UP, LOADER, f"{LOADER}.load_profile"),                                 # neither
        Call(LOADER, RESOLVED, f"{RESOLVED}.resolve", ("profile",)),                # 1 resolved
        Call(RESOLVED, STACK, f"{STACK}.effective_cuda"),                           # a string: off the walk
        Call(RESOLVED, RESOLVED, f"{RESOLVED}.Resolved.__init__", ("resolved",)),   # same stay
        Call(UP, CORE, f"{CORE}.plan", ("loaded",)),                                # 2 core
        Call(CORE, COSTS, f"{COSTS}.cost_of", ("offer",)),                          # 3 costs
        Call(CORE, CORE, f"{CORE}.Plan.__init__", ("plan",)),                       # 4 core (returns)
        Call(UP, BAKE, f"{BAKE}.BakedImages.choose", ("offer",)),                   # 5 bake
        Call(BAKE, CONTEXT, f"{CONTEXT}.stack_fields", ("loaded",)),                # 6 context
        Call(UP, LAUNCH, f"{LAUNCH}.launch_spec", ("loaded", "offer", "plan")),    # 7 launch
        Call(LAUNCH, SCRIPT, f"{SCRIPT}.render_script", ("loaded",)),               # 8 script: provision -> render climbs
        Call(SCRIPT, CONTEXT, f"{CONTEXT}.build_context", ("loaded",)),             # 9 context (returns)
        Call(LAUNCH, COSTS, f"{COSTS}.cost_of", ("offer",)),                        # 10 costs (returns), a climb
        Call(CREATE_CALLER, GCP, f"{GCP}.GcpProvider.create", ("spec", "offer")),   # 11 the create call
        Call(GCP, GCP, f"{GCP}.GcpProvider._send"),                                 # nothing carried: off the walk
        Call(GCP, REGISTRY, f"{REGISTRY}.request_for", ("spec",)),                  # inside the create call: apart
        Call(REGISTRY, CORE, f"{CORE}.Plan.price", ("plan",)),                      # a climb, but inside it
    ]
    got = count_profile(calls, CLOUDS)
    assert got["stay_path"] == [RESOLVED, CORE, COSTS, CORE, BAKE, CONTEXT, LAUNCH, SCRIPT, CONTEXT, COSTS, GCP]
    assert (got["steps"], got["stays"], got["modules"], got["returns"]) == (12, 11, 8, 3)
    assert got["climb_edges"] == {f"{LAUNCH} -> {COSTS}": 1, f"{LAUNCH} -> {SCRIPT}": 1}
    assert got["climbs"] == 2
    assert got["entries"] == {CONTEXT: 2, CORE: 2, COSTS: 2, BAKE: 1, GCP: 1, LAUNCH: 1, RESOLVED: 1, SCRIPT: 1}
    assert got["stays_in_create"] == 2  # the provider's own walk (registry, core), counted apart
    assert got["attempts"] == 1
    assert got["context_builds"] == {**dict.fromkeys(CONTEXT_BUILDERS, 0), "build_context": 1, "stack_fields": 1}
    assert got["context_builds_per_attempt"]["build_context"] == 1.0


def test_the_profile_walk_counts_context_builds_per_attempt() -> None:
    create = Call(CREATE_CALLER, GCP, f"{GCP}.GcpProvider.create", ("spec", "offer"))
    build = Call(SCRIPT, CONTEXT, f"{CONTEXT}.build_context", ("loaded",))
    got = count_profile([build, build, build, create, build, create], CLOUDS)
    assert got["attempts"] == 2
    assert got["context_builds"]["build_context"] == 4
    assert got["context_builds_per_attempt"]["build_context"] == 2.0
    assert count_profile([build], CLOUDS)["context_builds_per_attempt"]["build_context"] is None  # no attempt
