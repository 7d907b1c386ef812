"""The converter is deterministic and the committed data is what it generates."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest
import scripts_build as sb

from provisioner.catalog.storage import EMBEDDED_DIR

SNAPSHOT = sb.DEFAULT_SRC
needs_snapshot = pytest.mark.skipif(not sb.snapshot_file(SNAPSHOT, "gcp").is_file(),
                                    reason="scripts/catalog-snapshot (committed) is missing")


@needs_snapshot
def test_committed_data_is_up_to_date(tmp_path: Path):
    out = tmp_path / "a"
    sb.build(SNAPSHOT, out)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["README.md", "aws.csv", "azure.csv", "catalog.json", "disks.csv", "gcp.csv"]
    match, mismatch, errors = filecmp.cmpfiles(EMBEDDED_DIR, out, names, shallow=False)
    assert not mismatch and not errors, "run: python scripts/build_catalog.py"


@needs_snapshot
def test_build_is_deterministic(tmp_path: Path):
    sb.build(SNAPSHOT, tmp_path / "a")
    sb.build(SNAPSHOT, tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    _, mismatch, errors = filecmp.cmpfiles(tmp_path / "a", tmp_path / "b", names, shallow=False)
    assert not mismatch and not errors


@needs_snapshot
def test_check_mode(capsys):
    assert sb.main(["--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_missing_snapshot_is_an_error(tmp_path: Path):
    assert sb.main([str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2


def test_aws_zone_ids():
    assert sb.aws_zone_in_region("use1-az1", "us-east-1")
    assert sb.aws_zone_in_region("usw2-lax1-az1", "us-west-2")
    assert sb.aws_zone_in_region("apne1-az4", "ap-northeast-1")
    assert not sb.aws_zone_in_region("use2-az1", "us-east-1")
