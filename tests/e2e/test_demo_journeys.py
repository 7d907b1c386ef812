"""Issue 36 item 26: `make demo` serves every journey of the README. The demo server (tests/emulators/serve.py) runs
as the user runs it, a separate process; every `$ trainvm ...` line of the README's emulator section and of
docs/demo.md is then run, in order, through the real CLI (in-process, with the environment the server wrote for
`source`), and its exit code is the one the page writes beside it (none: 0). The profiles are the page's own YAML blocks and docs/profile-guide.md's `ddp.yaml`; the VM names the
page uses must be the ones `up` printed. At the end nothing is left (`list`, `images`), and Ctrl-C stops the server
with every process it started (Azurite's node process included) and removes the env file.

Also here: an Azure payload store whose blob endpoint does not answer is exit 3 (a connection problem), not exit 1."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO

DOC = REPO / "docs" / "demo.md"
README_SECTION = "## Trying it against the emulators"
START_TIMEOUT = 240  # seconds: moto, Azurite (node) and the ARM, GCE, GCS and price servers, on a loaded 2-core CI box


def fenced(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


def readme_demo() -> str:
    """The README's section on the emulators."""
    text = (REPO / "README.md").read_text()
    start = text.index(README_SECTION)
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def journey() -> list[tuple[list[str], int, list[str], str]]:
    """The README's demo commands, then docs/demo.md's, in order: (argv after `trainvm`, the exit code the comment
    says (none: 0), the "quoted" texts of the comment, which the output must hold, the line)."""
    steps = []
    for block in fenced(readme_demo(), "console") + fenced(DOC.read_text(), "console"):
        for line in block.splitlines():
            if line.startswith("$ trainvm "):
                command, _, comment = line[2:].partition("#")
                code = re.search(r"\bexit (\d+)", comment)
                steps.append((shlex.split(command)[1:], int(code.group(1)) if code else 0,
                              re.findall(r'"([^"]+)"', comment), line))
    return steps


def profiles() -> dict[str, str]:
    """The YAML files the journeys use: docs/demo.md's blocks, the README's and docs/profile-guide.md's (`ddp.yaml`),
    each named by its first comment."""
    files = {}
    for path in (DOC, REPO / "README.md", REPO / "docs" / "profile-guide.md"):
        for block in fenced(path.read_text(), "yaml"):
            first = re.match(r"# ([\w.-]+\.yaml)\b", block)
            if first:
                files[first.group(1)] = block
    return files


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc: parent ids)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, parent in parents.items() if parent == p}
        todo += list(kids - found)
        found |= kids
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def server(tmp_path):
    """`python -m tests.emulators.serve` as `make demo` runs it; yields (process, env file, its environment)."""
    env_file, out = tmp_path / "demo.env", tmp_path / "serve.out"
    with open(out, "w") as stdout, open(tmp_path / "serve.err", "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "tests.emulators.serve", "--env-file", str(env_file),
                                 "--state-dir", str(tmp_path / "state")], cwd=REPO, stdout=stdout, stderr=stderr)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while "emulators running" not in out.read_text():
            assert proc.poll() is None, f"the demo server exited {proc.returncode}:\n{(tmp_path / 'serve.err').read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the demo server did not start within {START_TIMEOUT} s"
            time.sleep(0.2)
        printed = [line for line in out.read_text().splitlines() if line.startswith("export ")]
        assert printed == env_file.read_text().splitlines()  # what it printed is what `source` reads
        env = {}
        for line in printed:
            key, value = line.removeprefix("export ").split("=", 1)
            if key != "PATH":  # the venv's bin folder ahead of "$PATH": the CLI runs in-process here
                env[key] = shlex.split(value)[0]
        yield proc, env_file, env
    finally:
        if proc.poll() is None:  # Ctrl-C, as a user stops it (SIGKILL would leave Azurite's node process behind)
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)


def use(monkeypatch, env: dict[str, str]) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def test_every_demo_journey_runs_against_make_demo(server, cli, monkeypatch, tmp_path) -> None:
    proc, env_file, env = server
    expected = {"TRAINVM_GCE_ENDPOINT", "TRAINVM_GCS_ENDPOINT", "TRAINVM_AZURE_ENDPOINT", "TRAINVM_AZURE_BLOB_ENDPOINT",
                "TRAINVM_AWS_ENDPOINT", "TRAINVM_AZURE_PRICES_URL", "TRAINVM_AWS_PRICES_URL", "TRAINVM_GCP_BILLING_URL"}
    assert expected <= set(env) and all(env[k].startswith(("http://127.0.0.1:", "https://127.0.0.1:")) for k in expected)
    use(monkeypatch, env)
    work = tmp_path / "work"  # the user's shell: the repository's profiles/, and the files the pages ask to write
    work.mkdir()
    (work / "profiles").symlink_to(REPO / "profiles")
    for name, text in profiles().items():
        (work / name).write_text(text)
    monkeypatch.chdir(work)

    steps = journey()
    assert len(steps) >= 30, steps
    outputs: list[str] = []
    created: set[str] = set()  # VM names `up` printed
    for argv, code, says, line in steps:
        argv = [resolve(a, outputs) for a in argv]
        for name in (a for a in argv if a.startswith("trainvm-") and argv[0] not in ("images",)):
            assert name in created, f"{line}: {name} is not a VM `up` created (the page's name is stale?)"
        r = cli(*argv)
        text = r.out + r.err
        assert r.code == code, f"{line}: exit {r.code}, not {code}\n{text[-3000:]}"
        assert "Traceback" not in text and "internal error" not in text, f"{line}\n{text[-3000:]}"
        outputs.append(text)
        if argv[0] == "up":
            created |= set(re.findall(r"\b(trainvm-[a-z0-9-]+-[0-9a-f]{8}): \w+ ", r.out))
        for want in says + [want for verb, want in CHECKS if argv[0] == verb]:
            assert want in text, f"{line}: {want!r} not in\n{text[-3000:]}"

    # docs/profile-guide.md's words on ddp.yaml: "4 nodes x a2-highgpu-1g at $3.67/h per node = $14.69/h for the cluster"
    ddp = "\n".join(o for o in outputs if "trainvm-ddp-929ba72a" in o)
    assert "a2-highgpu-1g" in ddp and "$14.69/h" in ddp and "$3.67/h" in ddp
    last_images = max(i for i, (argv, *_rest) in enumerate(steps) if argv == ["images"])
    assert "no baked images" in outputs[last_images] and "no trainvm VMs found" in outputs[-1]  # nothing left

    # Ctrl-C: every emulator stops, Azurite's node process too, and the env file is gone
    children = descendants(proc.pid)
    assert children, "the demo server started no process (Azurite runs as one)"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 0
    deadline = time.monotonic() + 10
    while any(alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in children if alive(p)], "processes left after Ctrl-C"
    assert not env_file.exists()


#: (command, what its output must say wherever it runs)
CHECKS = [("stop", "compute billing ends"), ("start", "compute billing resumed"), ("down", "deleted"),
          ("verify", "provisioning")]


def resolve(arg: str, outputs: list[str]) -> str:
    """A page's ``name-<placeholder>-...`` argument: the last such name the earlier commands printed."""
    if "<" not in arg:
        return arg
    pattern = "".join("[0-9a-z]+" if part.startswith("<") else re.escape(part)
                      for part in re.split(r"(<[^>]*>)", arg) if part)
    found = [m for text in outputs for m in re.findall(rf"\b{pattern}\b", text)]
    assert found, f"nothing printed earlier matches {arg}"
    return found[-1]


def test_an_unreachable_azure_blob_endpoint_is_exit_3(server, cli, monkeypatch, tmp_path) -> None:
    """Azure `up` whose payload store's blob endpoint does not answer (as `*.blob.core.windows.net` without a network,
    or a wrong TRAINVM_AZURE_BLOB_ENDPOINT): a connection problem, exit 3, naming it; no VM created."""
    _, _, env = server
    use(monkeypatch, env)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("TRAINVM_AZURE_BLOB_ENDPOINT", f"https://127.0.0.1:{port}")
    profile = tmp_path / "t4.yaml"
    profile.write_text(profiles()["t4.yaml"])
    r = cli("up", str(profile), "--cloud", "azure", "--yes", "--json")
    assert r.code == 3, r.out + r.err
    err = r.json()["error"]
    assert err["exit_code"] == 3 and "not a lack of capacity" in err["hint"]
    assert [a["outcome"] for a in err["attempts"]] == ["retry-exhausted"]
    assert "network error" in err["attempts"][0]["message"]  # in words, no SDK type name (issue 36 item 24)
    assert "no trainvm VMs found" in cli("list", "--cloud", "azure").out
    assert os.environ["TRAINVM_AZURE_BLOB_ENDPOINT"].endswith(str(port))
