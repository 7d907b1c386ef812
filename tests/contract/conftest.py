"""The provider contract suite's fixtures: ``cloud`` is a ``CloudHarness`` (harness.py) for each cloud in CLOUDS.
To add a cloud: see README.md in this folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # --import-mode=importlib does not put the repo root on sys.path
    sys.path.insert(0, str(ROOT))

from tests.contract.clouds_aws import aws_cloud, contract_moto_server  # noqa: E402,F401
from tests.contract.clouds_azure import azure_cloud, azure_offers, contract_arm_server  # noqa: E402,F401
from tests.contract.clouds_fake import fake_cloud  # noqa: E402,F401
from tests.contract.clouds_gcp import contract_gce_server, gcp_cloud  # noqa: E402,F401

#: every cloud the suite runs on; each name N needs a fixture ``N_cloud`` returning a CloudHarness
CLOUDS = ["fake", "gcp", "azure", "aws"]


@pytest.fixture(params=CLOUDS)
def cloud(request):
    return request.getfixturevalue(f"{request.param}_cloud")
