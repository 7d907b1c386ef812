"""CLI start-up time: whole-process medians next to the bare interpreter, and where the time goes.

    .venv/bin/python bench/startup.py [RUNS] [--importtime] [--baseline DIR]
    .venv/bin/python bench/startup.py [RUNS] --goals [--baseline DIR]

``--goals`` (issue 37): only ``python -c pass``, ``trainvm --help`` and ``trainvm plan <t4>``, their runs interleaved
(pass, help, plan, pass, help, plan, ...) so that all three see the same load, then each one's median wall and CPU
time and its ratio to ``python -c pass`` next to the goal (``--help`` <= 5x, ``plan <t4>`` <= 12.5x), and the floor of
each (its libraries imported, nothing done). ``trainvm --help`` is served by the help cache (provisioner/helpcache.py,
warmed by the unmeasured first run); ``--help, no help cache`` is typer printing it (``TRAINVM_NO_CACHE=1``). With
``--baseline DIR`` the baseline's ``--help`` and ``plan <t4>`` are interleaved with them too.

For each command: the median and min wall time of RUNS whole-process runs (default 31), its ratio to
``python -c pass`` run the same way (the floor: interpreter start + site), and the median CPU time
(user + sys of the child). On a shared machine wall time grows with the load average (printed
first); CPU time barely does, so it is the figure to compare between runs made under different
loads. ``--importtime`` adds the slowest imports of ``trainvm plan <t4>`` and ``trainvm --help``
(cumulative, from ``python -X importtime``). ``--no-credentials`` times the cloud commands instead (``list``,
``status NAME``, ``down NAME --yes``; issue 30: <= 1 s off-cloud) with no credentials for any cloud and the GCE and
EC2 metadata servers pointed at a loopback socket that accepts and never answers (as 169.254.169.254 behaves where
its packets are dropped: ``GCE_METADATA_IP``, ``AWS_EC2_METADATA_SERVICE_ENDPOINT``), printing how many connections
reached it. ``--baseline DIR`` (another checkout with its own ``.venv``,
e.g. ../main) runs each command alternately there and here, so that both see the same load, and
prints both. A ``--baseline`` folder without a ``.venv`` (e.g. ``git archive main | tar -x -C /tmp/base``) runs with
this interpreter and ``PYTHONPATH`` set to it, so that its ``provisioner`` package is the one imported (every run
starts in ``/``: ``python -c`` would put the current folder first on the path).

Targets (issues 12 and 26), warm, .pyc present, on the 2-core machine: ``trainvm --help`` <= 100 ms,
``trainvm plan <t4>`` <= 150 ms. Measured figures: bench/RESULTS.md. No cloud SDK may be imported on
these paths (tests/cli/test_validate_cli.py checks it; timings are never asserted in tests).

Also printed, so that the next person sees the trend: how many modules ``--help``, ``plan <t4>`` and
``plan <t4> --json`` leave in ``sys.modules`` (all, and trainvm's own), and how many function-local imports
``provisioner/`` has (an ``ast`` walk), by what they import: a cloud SDK (the one good reason: ``--help``
and ``plan`` never import one), another third-party library, the standard library, or trainvm itself (these
often hide a package cycle)."""

from __future__ import annotations

import ast
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
TRAINVM = str(Path(PY).with_name("trainvm"))
T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
FLOOR = ("import typer, typer._adapters, ruamel.yaml, rich.console, rich.table, packaging.requirements\n"
         "from pydantic import BaseModel, Field, field_validator, model_validator")
EXAMPLES = sorted(str(p) for p in (REPO / "profiles" / "examples").glob("*.yaml"))

COMMANDS = {
    "python -c pass": [PY, "-c", "pass"],
    "python -c 'import provisioner.cli'": [PY, "-c", "import provisioner.cli"],
    # the floor of `plan` with this stack: the libraries it cannot avoid, imported and nothing done
    "import typer+pydantic+ruamel+rich": [PY, "-c", FLOOR],
    "trainvm --version": [TRAINVM, "--version"],
    "trainvm --help": [TRAINVM, "--help"],
    "trainvm plan --help": [TRAINVM, "plan", "--help"],
    "trainvm validate <t4>": [TRAINVM, "validate", T4],
    "trainvm plan <t4>": [TRAINVM, "plan", T4],
    "trainvm plan <t4> --json": [TRAINVM, "plan", T4, "--json"],
    "trainvm validate <5 examples>": [TRAINVM, "validate", *EXAMPLES],
}


#: issue 37: whole-process median of each command / that of ``python -c pass``, measured side by side
GOALS = {"python -c pass": 1.0, "trainvm --help": 5.0, "trainvm plan <t4>": 12.5}
#: the libraries each command cannot avoid, imported and nothing done: where its ratio cannot go below. `--help`:
#: typer (its plain help); `plan <t4>` of a profile parsed before (no ruamel.yaml: the parsed-data cache): typer and
#: the pydantic TypeAdapters it builds per parameter (typer._adapters), the profile model's pydantic, rich's table
#: and packaging's requirement parser (the profile's pins)
GOAL_FLOORS = {
    "floor of typer's --help (import typer)": [PY, "-c", "import typer, typer.main, typer.core"],
    "floor of plan (its libraries)": [PY, "-c", "import typer, typer._adapters, rich.console, rich.table, "
                                      "packaging.requirements\nfrom pydantic import BaseModel, Field, TypeAdapter"],
}


def goals(runs: int, env: dict[str, str], baseline: Path | None = None) -> None:
    """The issue-37 figures: the commands' runs interleaved (and the floors'; with ``baseline``, its ``--help`` and
    ``plan <t4>`` too), medians (wall and CPU), ratios to ``-c pass``, and the goal met or not (on the wall-time
    ratio; the CPU one is printed beside it)."""
    rows = [(label, COMMANDS[label], env) for label in GOALS]
    # `--help` as typer prints it (the help cache's miss: provisioner/helpcache.py), for comparison
    rows.append(("trainvm --help, no help cache", COMMANDS["trainvm --help"], {**env, "TRAINVM_NO_CACHE": "1"}))
    if baseline is not None:
        rows += [(f"{label} (baseline)", rebase(COMMANDS[label], baseline), tree_env(env, baseline))
                 for label in list(GOALS)[1:]]
    rows += [(label, argv, env) for label, argv in GOAL_FLOORS.items()]
    results = measure([argv for _, argv, _ in rows], runs, [e for _, _, e in rows])
    wall0, cpu0 = statistics.median(results[0][0]), statistics.median(results[0][1])
    print(f"{'command':32s} {'wall med':>9s} {'min':>6s} {'x pass':>7s} {'cpu med':>8s} {'x pass':>7s} {'goal':>6s}")
    for (label, _, _), (wall, cpu) in zip(rows, results):
        med, cmed = statistics.median(wall), statistics.median(cpu)
        ratio, cratio = med / wall0, cmed / cpu0
        goal = GOALS.get(label.removesuffix(" (baseline)"), 1.0)
        verdict = "" if goal == 1.0 else f"{goal:5.1f}x {'met' if ratio <= goal else 'NOT met'}"
        print(f"{label:32s} {med:7.0f}ms {min(wall):4.0f}ms {ratio:6.1f}x {cmed:6.0f}ms {cratio:6.1f}x {verdict}")


NO_CREDENTIALS = {
    "trainvm list": [TRAINVM, "list"],
    "trainvm status NAME": [TRAINVM, "status", "bench-vm"],
    "trainvm down NAME --yes": [TRAINVM, "down", "bench-vm", "--yes"],
}


class Blackhole:
    """A loopback socket that accepts connections (counted) and never answers."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[object] = []
        threading.Thread(target=lambda: [self.accepted.append(self.sock.accept()) for _ in iter(int, 1)],
                         daemon=True).start()


def no_credentials_env(hole: Blackhole, tmp: str) -> dict[str, str]:
    drop = ("GOOGLE_", "AWS_", "AZURE_", "CLOUDSDK_", "GCE_METADATA", "TRAINVM_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    at = f"127.0.0.1:{hole.port}"
    return {**env, "HOME": tmp, "CLOUDSDK_CONFIG": tmp, "GCE_METADATA_IP": at, "GCE_METADATA_HOST": at,
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": f"http://{at}/", "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "TRAINVM_AWS_REGIONS": "us-east-1",
            "AZURE_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000"}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(argvs: list[list[str]], runs: int, env: dict[str, str] | list[dict[str, str]],
            check: bool = True) -> list[tuple[list[float], list[float]]]:
    """(wall ms, cpu ms) of each run of each argv, run alternately; one unmeasured run of each first warms
    the page cache and .pyc files. ``env``: one for all, or one per argv."""
    envs = env if isinstance(env, list) else [env] * len(argvs)
    for argv, e in zip(argvs, envs):
        subprocess.run(argv, capture_output=True, env=e, check=check, cwd=os.sep)
    out: list[tuple[list[float], list[float]]] = [([], []) for _ in argvs]
    for _ in range(runs):
        for argv, e, (wall, cpu) in zip(argvs, envs, out):
            c0, t0 = _cpu(), time.perf_counter()
            subprocess.run(argv, capture_output=True, env=e, check=check, cwd=os.sep)  # `python -c` puts cwd first
            wall.append((time.perf_counter() - t0) * 1000)
            cpu.append((_cpu() - c0) * 1000)
    return out


def rebase(argv: list[str], tree: Path) -> list[str]:
    """argv for the checkout ``tree``: its interpreter and trainvm, the same profiles (this interpreter where
    ``tree`` has no .venv: :func:`tree_env` points PYTHONPATH at it)."""
    venv = tree / ".venv" / "bin"
    if not venv.is_dir():
        return argv
    return [str(venv / Path(a).name) if a in (PY, TRAINVM) else a for a in argv]


def tree_env(env: dict[str, str], tree: Path) -> dict[str, str]:
    """``env`` for a baseline ``tree`` without a .venv: its sources first on the path (ahead of this editable install)."""
    return env if (tree / ".venv").is_dir() else {**env, "PYTHONPATH": str(tree)}


def importtime(argv: list[str], env: dict[str, str], top: int = 15) -> list[tuple[int, int, str]]:
    done = subprocess.run([PY, "-X", "importtime", *argv], capture_output=True, text=True, env=env)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = (p for p in line[len("import time:"):].split("|"))
        rows.append((int(cum_us), int(self_us), name.rstrip()))
    return sorted(rows, reverse=True)[:top]


CLOUD_SDK_PREFIXES = ("google.cloud", "google.api_core", "google.auth", "google.oauth2", "googleapiclient", "azure",
                      "boto3", "botocore", "msrest")
MODULE_COUNT = ("import sys\nsys.argv = ['trainvm', *sys.argv[1:]]\nfrom provisioner.cli import main\n"
                "try:\n    main()\nexcept SystemExit:\n    pass\n"
                "mods = list(sys.modules)\n"
                "sys.stderr.write('\\nMODULES %d %d\\n' % (len(mods), sum(m.split('.')[0] == 'provisioner' for m in mods)))\n")


def module_counts(env: dict[str, str]) -> dict[str, tuple[int, int]]:
    """(modules in sys.modules, of which provisioner.*) after each command, run in-process to its end."""
    out = {}
    for label in ("trainvm --help", "trainvm plan <t4>", "trainvm plan <t4> --json"):
        done = subprocess.run([PY, "-c", MODULE_COUNT, *COMMANDS[label][1:]], capture_output=True, text=True, env=env)
        line = [ln for ln in done.stderr.splitlines() if ln.startswith("MODULES ")][-1]
        total, own = (int(x) for x in line.split()[1:])
        out[label] = (total, own)
    return out


def import_kind(module: str) -> str:
    top = module.split(".")[0]
    if module.startswith(CLOUD_SDK_PREFIXES):
        return "cloud SDK"
    if top == "provisioner":
        return "provisioner"
    return "stdlib" if top in sys.stdlib_module_names else "other third-party"


def local_imports(root: Path = REPO / "provisioner") -> dict[str, int]:
    """Function-local import statements under ``root``, counted by :func:`import_kind` of what they import."""
    counts = {"cloud SDK": 0, "other third-party": 0, "stdlib": 0, "provisioner": 0}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
        seen: set[int] = set()
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if id(node) in seen or not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                seen.add(id(node))  # an import in a nested function is counted once
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        counts[import_kind(alias.name)] += 1
                else:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    name = f"{base}.{node.module or ''}" if node.level else (node.module or "")
                    counts[import_kind(name)] += 1
    return counts


def main() -> None:
    argv = sys.argv[1:]
    baseline = None
    if "--baseline" in argv:
        i = argv.index("--baseline")
        baseline = Path(argv[i + 1]).resolve()
        del argv[i:i + 2]
    args = [a for a in argv if not a.startswith("--")]
    runs = int(args[0]) if args else 31
    env = {**os.environ, "TRAINVM_TODAY": "2026-11-22"}
    commands, check = COMMANDS, True
    if "--no-credentials" in argv:
        import tempfile

        hole = Blackhole()
        env, commands, check = no_credentials_env(hole, tempfile.mkdtemp(prefix="trainvm-bench-")), NO_CREDENTIALS, False
    # "warm, .pyc present": where PYTHONDONTWRITEBYTECODE is set, an edited module would be compiled on every run
    for tree in [t for _, t in ([("baseline", baseline)] if baseline else []) + [("this", REPO)]]:
        python = tree / ".venv" / "bin" / "python"
        subprocess.run([str(python) if python.exists() else PY, "-m", "compileall", "-q", str(tree / "provisioner")], check=True)
    load = os.getloadavg()
    if "--goals" in argv:
        print(f"issue 37 goals, {runs} interleaved runs each, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
              f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        goals(runs, env, baseline)
        load = os.getloadavg()
        print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        return
    print(f"whole-process start-up, {runs} runs each, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    trees = ([("baseline", baseline)] if baseline else []) + [("this", REPO)]
    if baseline:
        print(f"baseline: {baseline} (runs alternate with this checkout, {REPO})")
    print(f"{'command':34s} {'':9s}{'median':>8s} {'min':>6s} {'x pass':>7s} {'cpu med':>8s}")
    base: dict[str, float] = {}
    for label, cmd in commands.items():
        results = measure([rebase(cmd, tree) if name == "baseline" else cmd for name, tree in trees], runs,
                          [tree_env(env, tree) if name == "baseline" else env for name, tree in trees], check)
        for (name, _), (wall, cpu) in zip(trees, results):
            med = statistics.median(wall)
            base.setdefault(name, med)
            print(f"{label:34s} {name:9s}{med:6.0f}ms {min(wall):4.0f}ms {med / base[name]:6.1f}x {statistics.median(cpu):6.0f}ms")
    if commands is NO_CREDENTIALS:
        print(f"connections to the never-answering metadata server: {len(hole.accepted)} "
              f"({(runs + 1) * len(commands) * len(trees)} runs)")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if commands is COMMANDS:
        print("\nmodules imported (sys.modules at the end of the command, all / provisioner.*):")
        for label, (total, own) in module_counts(env).items():
            print(f"  {label:32s} {total:5d} / {own:3d}")
    counts = local_imports()
    print(f"\nfunction-local imports in provisioner/: {sum(counts.values())} "
          f"({', '.join(f'{kind} {n}' for kind, n in counts.items())})")
    if "--importtime" in sys.argv:
        for label in ("trainvm plan <t4>", "trainvm --help"):
            print(f"\nlargest imports of `{label}` (cumulative ms, self ms; indentation = import depth):")
            for cum_us, self_us, name in importtime(COMMANDS[label], env):
                print(f"  {cum_us / 1000:7.1f} {self_us / 1000:6.1f}  {name}")


if __name__ == "__main__":
    main()
