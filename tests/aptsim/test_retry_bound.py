"""Each network operation of the startup script is retried by one bounded mechanism, ``tv_retry`` (3 attempts),
never a retry inside a retry (issue 37, "Retries": ``tv_retry`` around ``curl --retry 5`` made 18 tries).

Real tools against a loopback server (127.0.0.1 only) that answers every request it is told to fail with HTTP 503 and
counts them: the rendered debian-12 script's own ``tv_get`` (curl), ``tv_apt`` (apt-get) and ``tv_retry`` around uv
(with the script's exported UV_* settings). Each must reach the server exactly 3 times and then fail the phase with
``failed 3 times``. TRAINVM_RETRY_SLEEP=0; apt's and uv's own back-off would only make the old nesting slow."""

from __future__ import annotations

import hashlib
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import load_by_path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


fakerepo = load_by_path("trainvm_fakerepo", HERE / "fakerepo.py")
support = load_by_path("trainvm_render_support", REPO / "tests/render/support.py")

PROGRAM = r"""
mkdir -p "$TV_STATE/lib" "$TV_STATE/phases" "$TV_LOGDIR"
tv_write_helper
printf '%s\n' "$TV_EXPECTED" >"$TV_STATE/expected.json"
tv_publish() { :; }
tv_report() { :; }
trap 'tv_fail "$TV_PHASE" "$LINENO" "command failed (exit $?): $BASH_COMMAND"' ERR
TV_PHASE=$1
shift
"$@"
echo TRAINVM_UNREACHED
"""


@contextmanager
def failing_server(root: Path | None = None, fail: tuple[str, ...] = ("",)) -> Iterator[tuple[str, list[str]]]:
    """127.0.0.1: a GET whose path ends with one of ``fail`` gets 503 (counted); any other is served from ``root``."""
    hits: list[str] = []

    class H(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, directory=str(root or HERE), **k)

        def do_GET(self) -> None:  # noqa: N802
            if self.path.split("?")[0].endswith(fail):
                hits.append(self.path)
                self.send_error(503, "Service Unavailable")
                return
            super().do_GET()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def _run(tmp_path: Path, env: dict[str, str], phase: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    lp = support.from_dict(support.minimal_profile(os="debian-12", driver="550.127.05"))
    body, last = support.render(lp, "gcp").startup_sh.rstrip("\n").rsplit("\n", 1)
    assert last.startswith("tv_main"), last
    script = tmp_path / "bound.sh"
    script.write_text(body + "\n" + PROGRAM)
    root = Path(env["TRAINVM_ROOT"])
    (root / "etc").mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["bash", str(script), phase, *cmd], env={**env, "TRAINVM_RETRY_SLEEP": "0"},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=280, cwd=tmp_path)
    assert proc.returncode == 1 and "TRAINVM_UNREACHED" not in proc.stdout, proc.stdout[-3000:]
    assert "failed 3 times" in proc.stdout, proc.stdout[-3000:]
    return proc


def _env(tmp_path: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "TRAINVM_ROOT": str(tmp_path / "root")}


def test_a_download_reaches_a_failing_server_3_times(tmp_path):
    """tv_get (the uv wheel, cuda-keyring, the container keys, data[] https files): 3 tries, not 3 x 6."""
    with failing_server() as (url, hits):
        _run(tmp_path, _env(tmp_path), "python", "tv_get", url + "/uv.whl", str(tmp_path / "uv.whl"))
    assert len(hits) == 3, hits


def test_the_uv_install_reaches_a_failing_server_3_times(tmp_path):
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.fail("uv is not installed (it is a dev extra: make install-dev)")
    subprocess.run([uv, "venv", "-q", str(tmp_path / "venv")], check=True, env={**os.environ, "UV_NO_CONFIG": "1"})
    env = {**_env(tmp_path), "UV_CACHE_DIR": str(tmp_path / "uvcache")}
    with failing_server() as (url, hits):
        _run(tmp_path, env, "packages", "tv_retry", uv, "pip", "install", "-q", "--python", str(tmp_path / "venv/bin/python"),
             "--index-url", url + "/simple", "tinypkg==1.0")
    assert len(hits) == 3, hits


def test_an_apt_download_reaches_a_failing_server_3_times(tmp_path):
    if shutil.which("apt-get") is None:
        if os.environ.get("TRAINVM_NO_APT") == "1":
            pytest.skip("TRAINVM_NO_APT=1: apt-get is not on this machine")
        pytest.fail("apt-get is not installed (see tests/aptsim/test_driver_resolution.py)")
    world = fakerepo.AptWorld(tmp_path / "apt", ["550.127.05"])
    with open(world.tmp / "apt.conf", "a") as fh:  # apt's back-off between its own retries: slow, not different
        fh.write('Acquire::Retries::Delay "false";\n')
    repo = tmp_path / "repo"  # one package whose .deb the server refuses (with its sha256: apt wants a hash)
    repo.mkdir()
    packages = ("Package: tinydeb\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.invalid>\n"
                "Filename: ./tinydeb_1.0_all.deb\nSize: 4\nSHA256: " + hashlib.sha256(b"deb\n").hexdigest() + "\n"
                "Description: a test package\n\n").encode()
    (repo / "Packages").write_bytes(packages)
    (repo / "Release").write_text("Origin: t\nLabel: t\nArchitectures: amd64 all\nSHA256:\n "
                                  f"{hashlib.sha256(packages).hexdigest()} {len(packages)} Packages\n")
    with failing_server(repo, fail=(".deb",)) as (url, hits):
        (world.tmp / "etc/sources.list").write_text(f"deb [trusted=yes] {url}/ ./\n")
        world.apt("update")
        env = {**world.env, "TRAINVM_ROOT": str(world.root), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        _run(tmp_path, env, "driver", "tv_apt", "install", "--download-only", "tinydeb")
    assert len(hits) == 3, hits


def test_no_retry_inside_tv_retry_in_the_templates():
    """The loop above is the only one: no curl --retry under tv_retry or tv_get, no apt or uv retries of their own."""
    text = "\n".join(p.read_text() for p in (REPO / "templates").rglob("*.j2"))
    assert not re.search(r"tv_(?:retry|get)\b[^\n]*\s--retry\b", text)
    assert len(re.findall(r"tv_retry\s+curl", text)) == 1  # tv_get's: every download goes through it
    assert "Acquire::Retries=0" in text and "UV_HTTP_RETRIES=0" in text and "Acquire::Retries=5" not in text
