"""What `status` reads from an EC2 instance to count its run: StateTransitionReason's stop time."""

from __future__ import annotations

import pytest

from provisioner.providers.aws.instances import stop_time


@pytest.mark.parametrize(("reason", "expected"), [
    ("User initiated (2026-11-20 10:00:00 GMT)", "2026-11-20T10:00:00+00:00"),  # EC2's wording
    ("User initiated (2026-11-20 10:00:00 UTC)", "2026-11-20T10:00:00+00:00"),  # moto's
    ("Client.InstanceInitiatedShutdown: Instance initiated shutdown", None),     # no time given: not invented
    ("", None), (None, None),
])
def test_stop_time(reason: str | None, expected: str | None) -> None:
    assert stop_time(reason) == expected
