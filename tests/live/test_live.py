"""The live lane (issue 29): the scenario of tests/live/scenario.py on a real cloud account, at a bounded cost.

    make test-live CLOUD=gcp|azure|aws [PROFILE=path.yaml] [LIVE_MAX_USD=2] [LIVE_RESULTS=bench/live-results]

Marked ``live``: pyproject's addopts deselect it (`make test`, CI); `make test-live` selects it. Without CLOUD or
without that cloud's credentials it skips, saying why. It creates one VM (and what trainvm creates for it), deletes
it on every exit, and appends its figures to LIVE_RESULTS/CLOUD.jsonl (bench/live_table.py tabulates them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.live import scenario as S
from tests.live import worlds as W

pytestmark = pytest.mark.live


def test_live_scenario() -> None:
    cloud = os.environ.get("LIVE_CLOUD", "")
    if not cloud:
        pytest.skip("no cloud chosen: make test-live CLOUD=gcp|azure|aws")
    why = W.credentials_missing(cloud)
    if why:
        pytest.skip(f"live lane on {cloud}: {why}")
    profile = Path(os.environ.get("LIVE_PROFILE") or S.PROFILE).resolve()
    lane = S.Lane(W.LiveWorld(cloud), profile=profile, max_usd=S.env_max_usd(), results=S.env_results(),
                  ready_timeout=float(os.environ.get("LIVE_READY_TIMEOUT") or 2400))
    rec = lane.go()
    assert rec["ok"] and rec["leftovers"] == [], rec
