"""The walk of a profile through ``trainvm up`` (issue 26's closing note): which provisioner modules the call
sequence goes through from ``commands/up.py`` ``run_up`` until the provider's create call returns.

``trainvm up PROFILE --yes --json --cloud gcp`` runs in-process (``provisioner.cli.main``, as tests/conftest.py's
``cli`` fixture drives it) against the loopback GCE emulator (tests/emulators/gce.py) and the GCS emulator
(tests/emulators/gcs.py, where ``up`` stages its payload), with a cold parsed-data cache (a fresh
``XDG_CACHE_HOME``). ``sys.setprofile`` records every Python call into ``provisioner.*`` code of the main thread
from the call of ``run_up`` until the first ``create`` called from ``provisioner.provision.failover`` returns
(the provider's create call); recording stops there. Each recorded call is (caller module, callee module,
callee function), the caller being the nearest ``provisioner.*`` frame below it (a validator that pydantic calls
is called by the module that asked pydantic). Figures (:func:`count`):

- **stops**: the runs of one module along the call sequence (the first module entered, then one per change);
- **modules**: distinct modules among them; **returns**: stops into a module the walk had already left
  (stops - modules);
- **climbs** back up the layers: calls whose callee's layer comes before the caller's layer (:data:`LAYERS`), also
  counted as distinct (caller, callee) module edges;
- **package entries**: per top-level package (``provisioner.X``, a top-level module counts as its own), the runs
  of that package along the stops;
- by function name, where it exists in the revision: ``parse_image_ref`` (the image reference parsed),
  ``effective_cuda`` (the effective CUDA computed; issue 26 made it one function), ``stack_context`` and
  ``frameworks`` (the framework scan from the pins that the effective CUDA is derived from, in both revisions);
- **profile reads**: ``open()`` (builtins.open / io.open, which pathlib uses) of the profile's path.

The layer order (:data:`LAYERS`) follows docs/architecture.md's stage table (load, resolve, plan, render,
provision, verify), with the commands above the stages and the shared modules below them all:

    0 cli, commands          the command that drives the stages
    1 profile                load (profile/loader.py) and resolve (profile/resolved.py)
    2 compat, container, lock  what resolve derives from (the facts, the image reference and facts, the lock)
    3 planner, catalog, bake plan (the catalog it reads; bake/use.py picks a baked image at plan time)
    4 render                 render
    5 provision              provision (tries the offers, renders each one: provision -> render counts as a climb)
    6 providers/<cloud>      the per-cloud package (flat providers/<cloud>*.py modules in older revisions)
    7 verify, probe, perfprobe, agent   after provision (not on this walk)
    8 everything else        the shared layer every stage reads: providers/ shared modules (registry, base,
                             placement, access, store, poll...) and the top-level modules (errors, output, settings...)

Not modelled: calls in other threads (counted, not walked), C functions, and code that runs inline without a call.

**The profile's walk** (issue 37; :func:`count_profile`, printed under "the profile's walk"): the measure above counts
every provisioner call, loops and helpers included; this one follows the profile the way issue 37's reviewer did, the
data rather than every call. Of the same recorded sequence it keeps the calls that receive one of the profile's
records as an argument (``*args``/``**kwargs`` unpacked one level) or as ``self`` (:data:`CARRIED`):
``profile.loader.LoadedProfile``, ``profile.model.Profile``, ``profile.resolved.Resolved`` (the resolved record),
``planner.core.Plan``, ``providers.offer.Offer`` (only the plan's chosen and failover offers, the ones ``up`` may
try: not the catalog offers the planner looks at), ``render.script_context.ScriptContext`` (the render context) and
``providers.base.LaunchSpec``; a call that receives only a part of them (a string, ``profile.stack``) is off the
walk. The walk ends at the provider's create call (the first ``create`` called from ``provision.failover``,
included); what the provider does inside it is counted apart (**stays in create**). Along it:

- **stays**: the runs of one module along those calls; **modules**: distinct ones; **returns**: stays into a module
  the walk had already left (``entries``: stays per module, ``stay_path``: the stays in order);
- **climbs**: those calls whose callee's layer comes before the caller's (:data:`LAYERS`, as above);
- **context builds per attempt**: calls of :data:`CONTEXT_BUILDERS` (``build_context``; ``stack_fields``, the install
  phases' part a bake's identity hashes; the ``driver_fields``/``data_fields`` phases both compose) in the whole
  recorded sequence, divided by the attempts (create calls from ``provision.failover``; the emulator walk has one).

    .venv/bin/python bench/walk.py [--tree DIR] [--profile FILE] [--json]   one revision's walk
    .venv/bin/python bench/walk.py --compare BEFORE_DIR [AFTER_DIR]          both, side by side (subprocesses)
    .venv/bin/python bench/walk.py --layout [--tree DIR]                     one line per package of provisioner/
    .venv/bin/python bench/walk.py --cloud-names [--tree DIR]                places outside providers/ naming a cloud

``--tree`` runs another checkout's provisioner/ and tests/ (a ``git worktree``) with this venv."""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import dataclasses
import importlib
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parents[1]

LAYERS: dict[str, int] = {
    "cli": 0, "commands": 0, "__main__": 0,
    "profile": 1,
    "compat": 2, "container": 2, "lock": 2,
    "planner": 3, "catalog": 3, "bake": 3,
    "render": 4,
    "provision": 5,
    # 6: providers/<cloud> (see layer_of)
    "verify": 7, "probe": 7, "perfprobe": 7, "agent": 7,
}
CLOUD_LAYER, SHARED_LAYER = 6, 8
COUNTED = ("parse_image_ref", "effective_cuda", "stack_context", "frameworks")
START = ("provisioner.commands.up", "run_up")
#: the profile's records (the profile walk follows calls that receive one): kind -> "module:Class" (the first of
#: the alternatives that a revision has: older trees kept ``Offer`` in catalog/models.py, ``ScriptContext`` in
#: render/context.py)
CARRIED: dict[str, tuple[str, ...]] = {
    "loaded": ("provisioner.profile.loader:LoadedProfile",), "profile": ("provisioner.profile.model:Profile",),
    "resolved": ("provisioner.profile.resolved:Resolved",), "plan": ("provisioner.planner.core:Plan",),
    "offer": ("provisioner.providers.offer:Offer", "provisioner.catalog.models:Offer"),
    "context": ("provisioner.render.script_context:ScriptContext", "provisioner.render.context:ScriptContext"),
    "spec": ("provisioner.providers.base:LaunchSpec",),
    # the plan's per-offer record (h-walk, 2026-12-07): one of the offers up may try with the figures the planner
    # computed for it; it carries the chosen/failover offer, so a call that receives it is on the walk
    "candidate": ("provisioner.planner.core:Candidate",),
}
#: what builds (part of) a render context: build_context, and stack_fields (the install phases' part, a bake's
#: identity); driver_fields / data_fields: the install and data phases both compose
CONTEXT_BUILDERS = ("build_context", "stack_fields", "driver_fields", "data_fields")
CREATE_CALLER = "provisioner.provision.failover"
PROFILE = """\
# bench/walk.py: one T4 on GCE running an NGC image pinned by digest (tests/render/support.py container_profile)
name: walk
hardware: {gpu: T4, gpu_count: 1, min_vcpus: 8, min_memory_gib: 30, boot_disk: {type: balanced, size_gib: 150}}
placement: {clouds: [gcp], regions: [us-central1], spot: false, max_price_per_hour: 1.5}
stack:
  os: ubuntu-22.04
  driver: 550.127.05
  env: {PYTHONHASHSEED: "0"}
  container: {image: "nvcr.io/nvidia/pytorch:24.08-py3@sha256:%s"}
data:
  - {source: "gs://example-ml-data/glue/", dest: /mnt/data/glue}
lifecycle: {idle_shutdown_minutes: 60, max_run_hours: 24}
""" % ("c" * 64)


@dataclass(frozen=True)
class Call:
    caller: str | None  # nearest provisioner.* module below the callee's frame (None: none)
    callee: str         # the module entered
    function: str       # the callee's qualified name
    carries: tuple[str, ...] = ()  # the profile's records among its arguments or self (:data:`CARRIED`), by kind


def package_of(module: str) -> str:
    """``provisioner.X.y`` -> ``X`` (a top-level module ``provisioner.errors`` -> ``errors``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(module: str, clouds: Iterable[str]) -> int:
    parts = module.split(".")
    pkg = package_of(module)
    if pkg == "providers":
        sub = parts[2] if len(parts) > 2 else ""
        return CLOUD_LAYER if any(sub == c or sub.startswith(c + "_") for c in clouds) else SHARED_LAYER
    return LAYERS.get(pkg, SHARED_LAYER)


def _runs(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if not out or out[-1] != item:
            out.append(item)
    return out


def count(calls: Sequence[Call], clouds: Iterable[str]) -> dict[str, Any]:
    """The walk's figures from a call sequence (definitions: the module docstring)."""
    clouds = tuple(clouds)
    stops = _runs(c.callee for c in calls)
    seen: set[str] = set()
    returns = 0
    for module in stops:
        returns += module in seen
        seen.add(module)
    climbs = [(c.caller, c.callee) for c in calls
              if c.caller is not None and c.caller != c.callee and layer_of(c.callee, clouds) < layer_of(c.caller, clouds)]
    names = Counter(c.function.rsplit(".", 1)[-1] for c in calls)
    callers = Counter((c.function.rsplit(".", 1)[-1], c.caller) for c in calls if c.function.rsplit(".", 1)[-1] in COUNTED)
    return {
        "calls": len(calls), "stops": len(stops), "modules": len(seen), "returns": returns,
        "module_edges": len({(c.caller, c.callee) for c in calls if c.caller is not None and c.caller != c.callee}),
        "climbs": len(climbs), "climbing_edges": len(set(climbs)), "climb_edges": {f"{a} -> {b}": n for (a, b), n in sorted(Counter(climbs).items())},
        "package_entries": dict(sorted(Counter(_runs(package_of(m) for m in stops)).items())),
        "functions": {name: names[name] for name in COUNTED},
        "function_callers": {f"{name} <- {caller}": n for (name, caller), n in sorted(callers.items(), key=str)},
    }


def _is_create(call: Call) -> bool:
    return call.function.rsplit(".", 1)[-1] == "create" and call.caller == CREATE_CALLER


def _stays(path: Sequence[Call]) -> tuple[list[str], int]:
    stays = _runs(c.callee for c in path)
    seen: set[str] = set()
    returns = 0
    for module in stays:
        returns += module in seen
        seen.add(module)
    return stays, returns


def count_profile(calls: Sequence[Call], clouds: Iterable[str]) -> dict[str, Any]:
    """The profile's walk (definitions: the module docstring, "The profile's walk") from a call sequence whose calls
    say which of the profile's records they receive (``Call.carries``)."""
    clouds = tuple(clouds)
    path = [c for c in calls if c.carries]
    first = next((i for i, c in enumerate(path) if _is_create(c)), len(path) - 1)
    to_create, inside = path[:first + 1], path[first + 1:]
    stays, returns = _stays(to_create)
    climbs = [(c.caller, c.callee) for c in to_create
              if c.caller is not None and c.caller != c.callee and layer_of(c.callee, clouds) < layer_of(c.caller, clouds)]
    attempts = sum(1 for c in calls if _is_create(c))
    names = Counter(c.function.rsplit(".", 1)[-1] for c in calls)
    builds = {name: names[name] for name in CONTEXT_BUILDERS}
    return {
        "steps": len(to_create), "stays": len(stays), "modules": len(set(stays)), "returns": returns,
        "climbs": len(climbs), "climb_edges": {f"{a} -> {b}": n for (a, b), n in sorted(Counter(climbs).items())},
        "entries": {m: n for m, n in sorted(Counter(stays).items(), key=lambda kv: (-kv[1], kv[0]))},
        "stay_path": stays,
        "stays_in_create": len(_runs(c.callee for c in inside)),
        "attempts": attempts, "context_builds": builds,
        "context_builds_per_attempt": {k: (round(v / attempts, 2) if attempts else None) for k, v in builds.items()},
    }


def _arguments(frame: FrameType) -> list[object]:
    """The values a call received (self included), *args and **kwargs unpacked one level."""
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    star = code.co_flags & 0x04, code.co_flags & 0x08  # CO_VARARGS, CO_VARKEYWORDS
    names = code.co_varnames[:n + bool(star[0]) + bool(star[1])]
    local = frame.f_locals
    values: list[object] = [local[k] for k in names[:n] if k in local]
    if star[0] and names[n] in local:
        values += list(local[names[n]])
    if star[1] and names[-1] in local:
        values += list(local[names[-1]].values())
    return values


class Recorder:
    """``sys.setprofile`` hook: the provisioner calls from run_up's entry until the provider's create returns.
    ``carried``: kind -> class of the profile's records (:data:`CARRIED`, imported): each call notes which it receives."""

    def __init__(self, carried: dict[str, type] | None = None) -> None:
        self.calls: list[Call] = []
        self._carried = [(cls, kind) for kind, cls in (carried or {}).items()]
        self.offers: dict[int, list[object]] = {}  # call index -> the offers it received (which the plan's: after)
        self.plan: object | None = None  # the first Plan a call received
        self.state = "waiting"  # -> recording -> done
        self._create: FrameType | None = None
        self.other_threads = 0
        self.import_calls = 0  # calls made while a module body runs (an import): not on the walk
        self._imports: list[FrameType] = []

    @staticmethod
    def _module(frame: FrameType | None) -> str:
        return frame.f_globals.get("__name__", "") if frame is not None else ""

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "return" and frame is self._create:
            self.state, self._create = "done", None
        if event == "return" and self._imports and frame is self._imports[-1]:
            self._imports.pop()
        if event != "call" or self.state == "done":
            return
        module = self._module(frame)
        if self.state == "waiting":
            if (module, frame.f_code.co_name) != START:
                return
            self.state = "recording"
        if frame.f_code.co_name == "<module>":
            self._imports.append(frame)
        if not module.startswith("provisioner."):
            return
        if self._imports:
            self.import_calls += 1
            return
        below = frame.f_back
        while below is not None and not self._module(below).startswith("provisioner."):
            below = below.f_back
        carries: tuple[str, ...] = ()
        if self._carried:
            kinds: dict[str, None] = {}
            for value in _arguments(frame):
                for cls, kind in self._carried:
                    if isinstance(value, cls):
                        kinds[kind] = None
                        if kind == "offer":
                            self.offers.setdefault(len(self.calls), []).append(value)
                        elif kind == "plan" and self.plan is None:
                            self.plan = value
            carries = tuple(kinds)
        self.calls.append(Call(self._module(below) or None, module, f"{module}.{frame.f_code.co_qualname}", carries))
        if self._create is None and frame.f_code.co_name == "create" and self._module(frame.f_back) == CREATE_CALLER:
            self._create = frame

    def thread_hook(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and self.state == "recording" and self._module(frame).startswith("provisioner."):
            self.other_threads += 1


@contextlib.contextmanager
def _count_opens(path: Path, recorder: Recorder, counts: Counter[str]) -> Iterator[None]:
    real, real_os, target = builtins.open, os.open, os.path.realpath(path)

    def seen(file: Any) -> None:
        if isinstance(file, (str, os.PathLike)) and os.path.realpath(file) == target:
            counts["run"] += 1
            counts["walk"] += recorder.state == "recording"

    def opening(file: Any, *args: Any, **kwargs: Any) -> Any:
        seen(file)
        return real(file, *args, **kwargs)

    def os_opening(file: Any, *args: Any, **kwargs: Any) -> Any:
        seen(file)
        return real_os(file, *args, **kwargs)

    builtins.open = io.open = opening
    os.open = os_opening  # type: ignore[assignment]
    try:
        yield
    finally:
        builtins.open = io.open = real
        os.open = real_os


def _environment(tmp: Path, gce_url: str, gcs_url: str) -> None:
    for var in [k for k in os.environ if k.startswith(("TRAINVM_", "AZURE_", "AWS_", "GOOGLE_"))]:
        del os.environ[var]
    key = tmp / "id.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGwalkbenchkey walk@bench\n")
    os.environ.update({
        "XDG_CACHE_HOME": str(tmp / "cache"), "TRAINVM_TODAY": "2026-11-22", "TRAINVM_RETRY_BASE_DELAY": "0",
        "TRAINVM_READY_POLL_SECONDS": "0", "TRAINVM_SSH_PUBLIC_KEY": str(key), "TRAINVM_CAPTURE_LOCK": "0",
        "TRAINVM_DRIVER_INDEX_URL": "none", "TRAINVM_LOCK_IMAGES": "0", "TRAINVM_GCE_ENDPOINT": gce_url,
        "GOOGLE_CLOUD_PROJECT": "walk-proj", "TRAINVM_GCS_ENDPOINT": gcs_url, "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_EC2_METADATA_DISABLED": "true",
    })


def carried_classes() -> dict[str, type]:
    """:data:`CARRIED` imported from the tree on sys.path (a kind whose class the revision lacks is left out)."""
    out: dict[str, type] = {}
    for kind, names in CARRIED.items():
        for name in names:
            module, _, attr = name.partition(":")
            try:
                out[kind] = getattr(importlib.import_module(module), attr)
                break
            except (ImportError, AttributeError):
                continue
    return out


def plan_offers_only(recorder: Recorder) -> list[Call]:
    """The recorded calls, an ``offer`` kept in ``carries`` only where the call received one of the plan's offers (its
    chosen one or a failover: those ``up`` may try), not any catalog offer the planner looked at."""
    plan = recorder.plan
    tried = {id(o) for o in (getattr(plan, "chosen", None), *getattr(plan, "failover", ())) if o is not None}
    out = []
    for i, call in enumerate(recorder.calls):
        if "offer" in call.carries and not any(id(o) in tried for o in recorder.offers.get(i, ())):
            call = dataclasses.replace(call, carries=tuple(k for k in call.carries if k != "offer"))
        out.append(call)
    return out


def walk(profile: Path | None = None) -> dict[str, Any]:
    """Run ``trainvm up`` once against the emulators and return the figures (provisioner/ and tests/ come from
    ``sys.path``: the tree given with --tree)."""
    import provisioner
    from provisioner.providers.registry import CLOUD_NAMES
    from tests.emulators import gcs
    from tests.emulators.gce import GceEmulator

    with tempfile.TemporaryDirectory(prefix="trainvm-walk-") as name, GceEmulator() as emu:
        tmp = Path(name)
        path = profile or tmp / "walk.yaml"
        if profile is None:
            path.write_text(PROFILE)
        _environment(tmp, emu.url, gcs.shared().url)
        from provisioner.cli import main

        recorder, opens, out, err = Recorder(carried_classes()), Counter[str](), io.StringIO(), io.StringIO()
        sys.argv = ["trainvm", "up", str(path), "--yes", "--json", "--cloud", "gcp"]
        code = 0
        with _count_opens(path, recorder, opens), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            threading.setprofile(recorder.thread_hook)
            sys.setprofile(recorder)
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            finally:
                sys.setprofile(None)
                threading.setprofile(None)  # type: ignore[arg-type,unused-ignore]
        if gcs._SHARED is not None:  # older revisions have no stop_shared(); its server thread holds the exit
            gcs._SHARED.stop()
            gcs._SHARED = None
    if code != 0 or recorder.state != "done":
        raise SystemExit(f"trainvm up exited {code} (walk {recorder.state}):\n{err.getvalue()}")
    figures = count(recorder.calls, CLOUD_NAMES)
    figures["profile_walk"] = count_profile(plan_offers_only(recorder), CLOUD_NAMES)
    figures.update(tree=str(Path(provisioner.__file__).resolve().parents[1]), profile_reads_walk=opens["walk"],
                   profile_reads_run=opens["run"], other_thread_calls=recorder.other_threads,
                   import_time_calls=recorder.import_calls,
                   instance=json.loads(out.getvalue()).get("name"))
    return figures


def layout(tree: Path) -> list[str]:
    """One line per package of provisioner/ (subpackages included): modules, lines, its __init__ docstring's
    first sentence; the top-level modules on a line of their own."""
    root = tree / "provisioner"
    lines = []
    for folder in [root, *sorted({p.parent for p in root.rglob("*/__init__.py")} | {p.parent for p in root.glob("*/*.py")})]:
        mods = sorted(folder.glob("*.py"))
        init = folder / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) if init.is_file() else None
        what = "(top-level modules)" if folder == root else (doc or "(no __init__ docstring)")
        what = " ".join(what.split()).split(". ")[0]
        rel = folder.relative_to(tree).as_posix() + "/"
        total = sum(len(m.read_text().splitlines()) for m in mods)
        lines.append(f"{rel:28} {len(mods):3d} modules {total:6d} lines  {what}")
    return lines


class _Found(dict[str, int]):
    """Stands in for test_registry.ALLOWED: ``found == ALLOWED`` keeps ``found`` and compares true."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, dict):
            self.clear()
            self.update(other)
        return True

    __hash__ = None  # type: ignore[assignment,unused-ignore]


def cloud_names() -> dict[str, int]:
    """Places outside provisioner/providers/ that name a cloud: the rule of tests/unit/test_registry.py's
    ``test_no_new_cloud_name_branches_outside_providers`` (of the tree on sys.path), run as is with its ALLOWED
    replaced by a dict that keeps what the test found."""
    from tests.unit import test_registry

    found, allowed = _Found(), test_registry.ALLOWED
    test_registry.ALLOWED = found
    try:
        test_registry.test_no_new_cloud_name_branches_outside_providers()
    finally:
        test_registry.ALLOWED = allowed
    return dict(found)


def _one(args: argparse.Namespace) -> None:
    if args.layout:
        print("\n".join(layout(Path(sys.path[0]))))
        return
    if args.cloud_names:
        found = cloud_names()
        print(f"{sum(found.values())} places in {len(found)} files outside provisioner/providers/ name a cloud")
        for rel, n in found.items():
            print(f"  {n:3d}  {rel}")
        return
    figures = walk(args.profile)
    figures.update(cloud_names=sum(cloud_names().values()), packages=len(layout(Path(sys.path[0]))) - 1)
    if args.json:
        print(json.dumps(figures))
        return
    _print([("walk", figures)])


def _print(columns: list[tuple[str, dict[str, Any]]]) -> None:
    def row(label: str, values: Iterable[object]) -> None:
        print(f"{label:44}" + "".join(f"{v!s:>12}" for v in values))

    row("", [name for name, _ in columns])
    for key in ("calls", "stops", "modules", "returns", "module_edges", "climbs", "climbing_edges",
                "profile_reads_walk",
                "profile_reads_run", "other_thread_calls", "import_time_calls", "packages", "cloud_names"):
        row(key, [f.get(key, "-") for _, f in columns])
    for key in COUNTED:
        row(f"calls to {key}()", [f["functions"][key] for _, f in columns])
    for pkg in sorted({p for _, f in columns for p in f["package_entries"]}):
        row(f"entries into {pkg}", [f["package_entries"].get(pkg, 0) for _, f in columns])
    pw = [f.get("profile_walk", {}) for _, f in columns]
    print("\nthe profile's walk (calls that receive the profile's records):")
    for key in ("steps", "stays", "modules", "returns", "climbs", "stays_in_create", "attempts"):
        row(f"  {key}", [w.get(key, "-") for w in pw])
    for key in CONTEXT_BUILDERS:
        row(f"  {key}() per attempt", [w.get("context_builds_per_attempt", {}).get(key, "-") for w in pw])
    for name, f in columns:
        w = f.get("profile_walk", {})
        print(f"\nthe profile's walk ({name}): stays in order (a module's number: its entries so far)")
        entered: Counter[str] = Counter()
        for i, module in enumerate(w.get("stay_path", []), 1):
            entered[module] += 1
            print(f"  {i:3d}  {module.removeprefix('provisioner.')}" + (f"  (#{entered[module]})" if entered[module] > 1 else ""))
        print(f"climbs on the profile's walk ({name}):")
        for edge, n in w.get("climb_edges", {}).items():
            print(f"  {n:4d}  {edge}")
    for name, f in columns:
        print(f"\nclimbs ({name}: {f['tree']}), callee's layer before its caller's:")
        for edge, n in f["climb_edges"].items():
            print(f"  {n:4d}  {edge}")
        print(f"counted functions ({name}), by caller:")
        for edge, n in f["function_callers"].items():
            print(f"  {n:4d}  {edge}")


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=REPO)
    ap.add_argument("--profile", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--layout", action="store_true")
    ap.add_argument("--cloud-names", action="store_true")
    ap.add_argument("--compare", nargs="+", type=Path, metavar="DIR")
    args = ap.parse_args(argv)
    if args.compare:
        trees = [*args.compare, REPO][:2]
        cols: list[tuple[str, dict[str, Any]]] = []
        for tree in trees:
            cmd = [sys.executable, __file__, "--tree", str(tree.resolve()), "--json"]
            cmd += ["--profile", str(args.profile.resolve())] if args.profile else []
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise SystemExit(f"{tree}: {proc.stderr.strip()}")
            cols.append((("before", "after")[len(cols)], json.loads(proc.stdout.splitlines()[-1])))
        _print(cols)
        return
    sys.path.insert(0, str(args.tree.resolve()))
    _one(args)


if __name__ == "__main__":
    main(sys.argv[1:])
