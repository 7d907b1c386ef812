"""The live lane's scenario (issue 29): plan -> cost cap -> up --wait-ready -> verify -> logs -> stop (and the
billing state as the cloud reports it) -> start -> verify -> verify --perf (when a baseline exists) -> down ->
list, driven through the trainvm CLI as a user runs it (a subprocess per command).

The same code runs against a real cloud (tests/live/test_live.py, `make test-live`) and against the emulators
(tests/live/test_scenario_emulators.py, in `make test`): only the ``World`` differs (tests/live/worlds.py):
where the endpoints and credentials come from, what plays the VM (the emulator world plants the console and
report a startup script would write; the live world plants nothing) and where the billing state is read.

Always down: once ``up`` has been started, ``down NAME --yes`` runs on every exit (a failed step, an
exception, Ctrl-C or SIGTERM), then ``list`` on every cloud with credentials; what is left is printed and
recorded. The cost cap is checked on ``plan --json`` before anything is created."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "tests" / "live" / "live-t4.yaml"
DEFAULT_MAX_USD = 2.0
DEFAULT_RESULTS = REPO / "bench" / "live-results"
# what `stop` must leave, as each cloud reports it: compute billing has ended
STOPPED = {"gcp": "TERMINATED", "azure": "PowerState/deallocated", "aws": "stopped"}


class World(Protocol):
    """What differs between a real cloud and the emulators."""

    cloud: str
    kind: str  # "live" | "emulator": recorded, so emulator figures are never read as real ones

    def before_up(self, name: str) -> None:
        """Called just before `up` (the emulator world plants what the VM's startup script would print)."""

    def after_start(self, name: str) -> None:
        """Called after `start` (the emulator world plants what the re-run startup script prints)."""

    def billing_state(self, name: str, up_doc: dict[str, Any]) -> str:
        """The VM's power state as the cloud reports it (compared with STOPPED after `stop`)."""

    def leftovers(self, name: str) -> list[str]:
        """Resources of ``name`` the cloud still holds after `down` (beyond what `list` shows)."""


@dataclass
class Result:
    args: tuple[str, ...]
    code: int
    out: str
    err: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.out)


class StepFailed(Exception):
    def __init__(self, step: str, result: Result | None, why: str) -> None:
        super().__init__(f"step {step} failed: {why}")
        self.step, self.result = step, result


class CostCapExceeded(Exception):
    pass


class Interrupted(BaseException):
    """SIGTERM, turned into an exception (as Python does for SIGINT) so that the `finally` that runs `down` runs."""


def trainvm(*args: str, timeout: float = 3600) -> Result:
    """``trainvm ARGS`` as a user runs it: this interpreter's trainvm, in a subprocess, this environment."""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    return Result(args, done.returncode, done.stdout, done.stderr, round(time.monotonic() - t0, 2))


def worst_case(plan: dict[str, Any], max_usd: float) -> dict[str, Any]:
    """The lane's worst-case cost from `plan --json`: the failover bound (the dearest price any attempt may pay)
    x nodes x the profile's lifecycle.max_run_hours (the VM stops itself by then, whatever happens to the
    lane). Raises CostCapExceeded above ``max_usd`` or when the plan gives no bound."""
    chosen, bound, lifecycle = plan.get("chosen"), plan.get("failover_bound") or {}, plan.get("lifecycle") or {}
    if not chosen:
        raise CostCapExceeded(f"no feasible offer: {plan.get('message')}")
    hours = lifecycle.get("max_run_hours")
    if not hours:
        raise CostCapExceeded("the profile sets no lifecycle.max_run_hours: the lane's duration would be unbounded")
    nodes = (plan.get("estimate") or {}).get("nodes") or 1
    price = max(float(bound.get("price_hourly") or 0), float(chosen["price_hourly"]))
    usd = round(price * nodes * float(hours), 4)
    doc = {"usd": usd, "price_hourly_bound": price, "basis": bound.get("basis"), "nodes": nodes, "hours": hours,
           "cap_usd": max_usd}
    if usd > max_usd:
        raise CostCapExceeded(f"worst case ${usd:.2f} (failover bound ${price:.3f}/h x {nodes} node(s) x {hours} h "
                              f"max_run_hours) is above LIVE_MAX_USD=${max_usd:.2f}: nothing was created")
    return doc


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises Interrupted in the main thread for the duration (SIGINT already raises KeyboardInterrupt)."""
    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: SIGTERM keeps its default
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class Lane:
    world: World
    profile: Path = PROFILE
    max_usd: float = DEFAULT_MAX_USD
    results: Path = DEFAULT_RESULTS
    ready_timeout: float = 2400
    poll_seconds: float = 15
    say: Callable[[str], None] = print
    run: Callable[..., Result] = trainvm
    record: dict[str, Any] = field(default_factory=dict)
    transcript: list[str] = field(default_factory=list)

    def _log(self, line: str) -> None:
        self.transcript.append(line)
        self.say(line)

    def cli(self, step: str, *args: str, ok: tuple[int, ...] = (0,)) -> Result:
        self._log("$ trainvm " + " ".join(args))
        r = self.run(*args)
        self._log(f"  -> exit {r.code} in {r.seconds:.1f} s")
        self.record["steps"].append({"step": step, "exit": r.code, "seconds": r.seconds})
        if r.code not in ok:
            tail = (r.err.strip() or r.out.strip()).splitlines()[-3:]
            raise StepFailed(step, r, f"exit {r.code}: " + " | ".join(tail))
        return r

    def go(self) -> dict[str, Any]:
        """Runs the scenario; returns the record (also appended to the results file). Raises what failed
        (CostCapExceeded, StepFailed, KeyboardInterrupt, Interrupted...) after `down` and `list` have run."""
        cloud = self.world.cloud
        name = f"trainvm-live-{cloud}-{secrets.token_hex(3)}"
        version = self.run("--version").out.strip()
        self.record = {"cloud": cloud, "world": self.world.kind, "name": name, "profile": self.profile.name,
                       "started": datetime.now(UTC).isoformat(timespec="seconds"), "trainvm_version": version,
                       "steps": [], "ok": False}
        created = False
        try:
            with sigterm_as_interrupt():
                plan = self.cli("plan", "plan", str(self.profile), "--cloud", cloud, "--json").json()
                self.record["catalog"] = {k: plan["catalog"].get(k) for k in ("date", "age_days", "origin")}
                self.record["worst_case"] = worst_case(plan, self.max_usd)  # before anything is created
                self._log(f"  worst case ${self.record['worst_case']['usd']:.2f} <= LIVE_MAX_USD ${self.max_usd:.2f}")
                self.world.before_up(name)
                created = True  # from here on a VM (or a part of one) may exist: `down` runs on every exit
                up = self.cli("up", "up", str(self.profile), "--yes", "--json", "--cloud", cloud, "--name", name,
                              "--wait-ready", "--ready-timeout", f"{self.ready_timeout:g}").json()
                self.record["shape"] = {k: up.get(k) for k in ("instance_type", "zone", "region", "price_hourly", "image")}
                self.record["time_to_ready_s"] = self.record["steps"][-1]["seconds"]
                self._expect("up", up.get("status") == "match", f"up --wait-ready ended {up.get('status')}")
                self._verify("verify")
                logs = self.cli("logs", "logs", name, "--json", "--cloud", cloud).json()
                self.record["phases"] = {p["phase"]: p["seconds"] for p in logs.get("phases") or []}
                self.cli("stop", "stop", name, "--yes", "--json", "--cloud", cloud)
                state = self.world.billing_state(name, up)
                self.record["stopped_state"] = state
                self._log(f"  {cloud} reports {name}: {state}")
                self._expect("stop", state == STOPPED[cloud], f"{cloud} reports {state}, not {STOPPED[cloud]}")
                self.cli("start", "start", name, "--json", "--cloud", cloud)
                self.world.after_start(name)
                self._verify("verify-again", wait=True)  # the startup script re-verifies on this boot
                baseline = self.profile.with_name(self.profile.stem + ".perf.json")
                if baseline.exists():
                    self.cli("verify-perf", "verify", name, "--perf", "--baseline", str(self.profile), "--cloud", cloud)
                self.record["ok"] = True
        except BaseException as exc:
            self.record["error"] = f"{type(exc).__name__}: {exc}"
            self._log(f"  FAILED: {self.record['error']}")
            raise
        finally:
            if created:
                self._down(name)
            self._write()
        return self.record

    def _expect(self, step: str, ok: bool, why: str) -> None:
        if not ok:
            raise StepFailed(step, None, why)

    def _verify(self, step: str, wait: bool = False) -> None:
        """`verify`; with ``wait``, again while it says provisioning (exit 5), for at most ready_timeout."""
        from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

        def once() -> Result:
            return self.cli(step, "verify", self.record["name"], "--json", "--cloud", self.world.cloud, ok=(0, 1, 5))

        if wait:
            retrying = Retrying(retry=retry_if_result(lambda res: res.code == 5), stop=stop_after_delay(self.ready_timeout),
                                wait=wait_fixed(self.poll_seconds), retry_error_callback=lambda state: state.outcome.result())
            r = retrying(once)
        else:
            r = once()
        status = r.json().get("status")
        self._expect(step, r.code == 0 and status == "match", f"verify says {status} (exit {r.code})")

    def _down(self, name: str) -> None:
        """`down`, then `list` on every cloud with credentials and the world's own look: what is left is said."""
        with _shielded():  # a second Ctrl-C must not cut the clean-up short
            left: list[str] = []
            try:
                down = self.cli("down", "down", name, "--yes", "--json", "--cloud", self.world.cloud, ok=(0, 1, 3, 4))
                if down.code != 0:
                    left.append(f"down exited {down.code}: {down.err.strip()[-300:]}")
                listed = self.cli("list", "list", "--json", ok=(0, 1, 3))
                try:
                    vms = listed.json().get("vms") or []
                except ValueError:
                    vms = []
                    left.append(f"list exited {listed.code}: {listed.err.strip()[-300:]}")
                left += [f"{v['cloud']} VM {v['name']} ({v.get('state')})" for v in vms if v.get("name") == name]
                left += self.world.leftovers(name)
            except Exception as exc:  # the record still says what could not be checked
                left.append(f"clean-up could not finish: {type(exc).__name__}: {exc}")
            self.record["leftovers"] = left
            if left:
                self._log(f"  NOT DELETED (delete by hand): {'; '.join(left)}")
            else:
                self._log(f"  nothing left: {name} is gone")

    def _write(self) -> None:
        self.record["ended"] = datetime.now(UTC).isoformat(timespec="seconds")
        self.results.mkdir(parents=True, exist_ok=True)
        with (self.results / f"{self.world.cloud}.jsonl").open("a") as fh:
            fh.write(json.dumps(self.record) + "\n")  # phases in the order they ran


@contextmanager
def _shielded() -> Iterator[None]:
    """SIGINT ignored while the clean-up runs (it is short and bounded by the commands' own timeouts)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to shield
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def env_max_usd() -> float:
    return float(os.environ.get("LIVE_MAX_USD") or DEFAULT_MAX_USD)


def env_results() -> Path:
    return Path(os.environ.get("LIVE_RESULTS") or DEFAULT_RESULTS)
