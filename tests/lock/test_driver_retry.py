"""Reading the driver index over HTTP: transient answers (5xx, 429) are retried within RETRY_DEADLINE_S
(tenacity, through providers/poll.py), a 404 is not. A loopback server plays NVIDIA's repository."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from provisioner.lock.model import read_lock


@pytest.fixture
def flaky_index(driver_index: Path) -> Iterator[tuple[list[int], list[str], str]]:
    """Answers the statuses in ``plan`` first (one per request), then the real index; ``seen`` lists the paths."""
    plan: list[int] = []
    seen: list[str] = []
    body = driver_index.read_bytes()

    class H(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            status = plan.pop(0) if plan else 200
            data = body if status == 200 else b"busy"
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield plan, seen, f"http://127.0.0.1:{httpd.server_address[1]}/{{repo}}/Packages"
    httpd.shutdown()
    httpd.server_close()


def test_a_503_is_retried_and_the_lock_gets_the_exact_versions(write_yaml, lock_cli, profile_doc, flaky_index, monkeypatch) -> None:
    plan, seen, url = flaky_index
    plan[:] = [503, 429]
    monkeypatch.setenv("TRAINVM_DRIVER_INDEX_URL", url)
    path = write_yaml(profile_doc(["alpha==1.0"]))
    r = lock_cli(path)
    assert r.code == 0, r.err
    assert len(seen) == 3  # 503, 429, then the index
    assert read_lock(path.with_suffix(".lock")).driver.packages["nvidia-open"] == "550.127.05-2"


def test_a_404_is_not_retried(write_yaml, lock_cli, profile_doc, flaky_index, monkeypatch) -> None:
    plan, seen, url = flaky_index
    plan[:] = [404, 404, 404]
    monkeypatch.setenv("TRAINVM_DRIVER_INDEX_URL", url)
    path = write_yaml(profile_doc(["alpha==1.0"]))
    r = lock_cli(path)
    assert r.code == 0 and "exact apt versions not resolved" in r.err and "Not Found" in r.err
    assert len(seen) == 1


def test_a_server_that_stays_busy_is_given_up_on_at_the_deadline(write_yaml, lock_cli, profile_doc, flaky_index, monkeypatch) -> None:
    plan, seen, url = flaky_index
    plan[:] = [503] * 100
    monkeypatch.setattr("provisioner.lock.driver.RETRY_DEADLINE_S", 1.5)
    monkeypatch.setenv("TRAINVM_DRIVER_INDEX_URL", url)
    path = write_yaml(profile_doc(["alpha==1.0"]))
    r = lock_cli(path)
    assert r.code == 0 and "Service Unavailable (retried 2s)" in r.err  # 1.5 s, as "%.0f" writes it
    assert 2 <= len(seen) <= 4  # ~1 s of exponential backoff from 1 s
    assert read_lock(path.with_suffix(".lock")).driver.packages == {}
