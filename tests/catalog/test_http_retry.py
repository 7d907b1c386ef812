"""catalog/http.py retries through the project's one retry policy, providers/poll.py (issue 37, "Retries"):
the same jittered backoff as every provider, Retry-After honoured, and the whole call (retries included) bounded by
TRAINVM_API_TIMEOUT. A loopback server answers; time is a fake clock that moves only when http sleeps."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from provisioner.catalog import http
from provisioner.errors import CloudError
from tests.catalog.price_server import PriceServer
from tests.fakes import Clock

REPO = Path(__file__).resolve().parents[2]


def _ok(path, query, headers):
    return 200, {"Content-Type": "application/json"}, json.dumps({"ok": True}).encode()


@pytest.fixture
def timed(monkeypatch):
    """http's waits recorded on a fake clock that they advance."""
    clock, waits = Clock(), []

    def sleep(s: float) -> None:
        waits.append(s)
        clock.advance(s)

    monkeypatch.setattr(http, "sleep", sleep)
    monkeypatch.setattr(http, "clock", clock, raising=False)
    return waits


def test_backoff_is_poll_s_jittered_backoff(monkeypatch, timed):
    """Without Retry-After the waits are poll's equal-jitter backoff (half fixed, half random: random.uniform
    pinned to its low end here), not a loop of the catalog's own."""
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "1")
    monkeypatch.setenv("TRAINVM_API_TIMEOUT", "100")
    monkeypatch.setattr(random, "uniform", lambda a, b: a)
    with PriceServer(_ok) as srv:
        srv.failures["/p"] = [(503, {}, b"unavailable")] * 3
        assert http.get_json(srv.url + "/p") == {"ok": True}
    assert timed == [0.5, 1.0, 2.0]


def test_retry_after_is_honoured(monkeypatch, timed):
    monkeypatch.setenv("TRAINVM_API_TIMEOUT", "100")
    with PriceServer(_ok) as srv:
        srv.failures["/p"] = [(429, {"Retry-After": "7"}, b"slow down")]
        assert http.get_json(srv.url + "/p") == {"ok": True}
    assert timed == [7.0]


def test_the_call_and_its_retries_stay_within_trainvm_api_timeout(monkeypatch, timed):
    """A server that always asks for 60 s: the waits stop at the budget (the old loop slept 4 x 60 s)."""
    monkeypatch.setenv("TRAINVM_API_TIMEOUT", "10")
    with PriceServer(_ok) as srv:
        srv.failures["/p"] = [(503, {"Retry-After": "60"}, b"unavailable")] * 5
        with pytest.raises(CloudError, match=r"HTTP 503.*after \d tries") as e:
            http.get_json(srv.url + "/p")
    assert sum(timed) <= 10.0 and len(srv.requests) <= http.TRIES
    assert "old catalog is kept" in (e.value.hint or "")


def test_tries_are_bounded(monkeypatch, timed):
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    with PriceServer(_ok) as srv:
        srv.failures["/p"] = [(503, {}, b"unavailable")] * 9
        with pytest.raises(CloudError, match=r"after 5 tries"):
            http.get_json(srv.url + "/p")
        assert len(srv.requests) == http.TRIES == 5


def test_only_poll_runs_a_retry_loop():
    """One retry library, one loop: tenacity is imported by providers/poll.py only (the rule in its doc)."""
    importers = sorted(str(p.relative_to(REPO)) for p in (REPO / "provisioner").rglob("*.py")
                       if any(line.strip().startswith(("from tenacity", "import tenacity"))
                              for line in p.read_text(encoding="utf-8").splitlines()))
    assert importers == ["provisioner/providers/poll.py"]
