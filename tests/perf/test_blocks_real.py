"""Blocks 0 (non-GPU), 5, 6 and 7 run for real here with small budgets; no timing is asserted,
only that each block measured what it says, in the document's shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.perfprobe import stats
from provisioner.perfprobe.context import cgroup_cpu_quota, filesystem, host_context, mount_of
from provisioner.perfprobe.cpu import cpu_block, scaling_efficiency
from provisioner.perfprobe.disk import disk_block, parse_fio
from provisioner.perfprobe.loader import loader_block
from provisioner.verify.perfdoc import Metric

REPO = Path(__file__).resolve().parents[2]

MOUNTINFO = """22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
40 22 0:50 / /mnt/data rw,relatime - nfs4 filer:/export/data rw,vers=4.2
41 22 0:51 / /mnt/data\\040sets rw - fuse.gcsfuse bucket rw
"""


def test_stats() -> None:
    assert stats.median([3, 1, 2]) == 2
    assert stats.cv([10, 10, 10]) == 0 and stats.cv([5]) == 0
    assert stats.cv([9, 11]) == pytest.approx(0.1)
    rec = stats.metric([1.0, float("nan"), 3.0], "x", "cpu")
    assert rec["median"] == 2 and rec["dropped"] == 1 and rec["repeats"] == [1.0, 3.0]
    with pytest.raises(ValueError):
        stats.metric([1.0], "x", "nonsense")
    with pytest.raises(ValueError):
        stats.block("skipped")  # a skip needs its reason


def test_mount_and_network_fs() -> None:
    assert mount_of("/mnt/data/glue/x", MOUNTINFO)["fstype"] == "nfs4"
    assert mount_of("/mnt/data sets/a", MOUNTINFO)["fstype"] == "fuse.gcsfuse"
    assert mount_of("/home/me", MOUNTINFO)["fstype"] == "ext4"


def test_filesystem_reads_mountinfo_under_root(tmp_path: Path) -> None:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mountinfo").write_text(MOUNTINFO)
    fs = filesystem("/mnt/data/glue", tmp_path)
    assert fs["network"] is True and fs["mount_point"] == "/mnt/data"


@pytest.mark.parametrize(("files", "expected"), [
    ({"sys/fs/cgroup/cpu.max": "400000 100000\n"}, 4.0),
    ({"sys/fs/cgroup/cpu.max": "max 100000\n"}, None),
    ({"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "150000\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"}, 1.5),
    ({"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({}, None),
])
def test_cgroup_quota(tmp_path: Path, files: dict[str, str], expected: float | None) -> None:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert cgroup_cpu_quota(tmp_path) == expected


def test_host_context_for_real(tmp_path: Path) -> None:
    ctx = host_context(str(tmp_path), environ={"OMP_NUM_THREADS": "1", "HOME": "/root"})
    assert ctx["thread_env"] == {"OMP_NUM_THREADS": "1"}
    assert ctx["cpu_count"] >= 1 and ctx["data_fs"]["fstype"]


def test_parse_fio_json() -> None:
    text = 'note: both iodepth >= 1 and synchronous I/O engine are selected\n{"fio version": "fio-3.33", "jobs": [{"jobname": "trainvm", "read": {"io_bytes": 67108864, "bw_bytes": 1048576000, "bw": 1024000, "iops": 1000.0}}]}'
    assert parse_fio(text) == {"bw_bytes": 1048576000.0, "iops": 1000.0}


def _valid(block: dict) -> None:
    assert block["status"] == "ok", block
    for m in block["metrics"].values():
        Metric.model_validate(m)
        assert len(m["repeats"]) >= 3 and m["median"] > 0


def test_disk_block_for_real(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    blk = disk_block(str(data), 0.5, scratch=str(tmp_path), size=4 << 20)
    _valid(blk)
    assert set(blk["metrics"]) == {"disk_scratch_seq_read_mbs", "disk_scratch_rand4k_read_iops",
                                   "disk_data_seq_read_mbs", "disk_data_rand4k_read_iops"}
    assert not list(data.iterdir()), "the probe's test file is removed"


def test_disk_block_on_a_read_only_tree_without_big_files(tmp_path: Path) -> None:
    blk = disk_block(str(tmp_path / "nope"), 0.2, scratch=str(tmp_path / "nope"), size=1 << 20)
    assert blk["status"] == "skipped" and "not writable" in blk["reason"]


def test_loader_block_without_torch(tmp_path: Path) -> None:
    for i in range(6):
        (tmp_path / f"f{i}.bin").write_bytes(bytes(range(256)) * 64)
    blk = loader_block(str(tmp_path), 1.0, workers=2, torch=None)
    _valid(blk)
    assert blk["info"]["backend"] == "multiprocessing.Pool"
    assert {"loader_synthetic_w0_items_s", "loader_synthetic_wN_items_s", "loader_data_w0_items_s",
            "loader_data_wN_items_s"} == set(blk["metrics"])
    assert blk["metrics"]["loader_data_wN_items_s"]["workers"] == 2


def test_cpu_block(monkeypatch: pytest.MonkeyPatch) -> None:
    blk = cpu_block(0.6, cpus=2)
    _valid(blk)
    assert {"cpu_single_units_s", "cpu_all_units_s", "cpu_scaling_efficiency"} <= set(blk["metrics"])
    assert scaling_efficiency(100, 150, 2) == 0.75


def test_runner_is_stdlib_only_and_prints_one_document(tmp_path: Path) -> None:
    """-I -S: no site-packages, so pydantic, packaging, numpy and torch are all absent."""
    boot = "import sys; sys.path.insert(0, sys.argv.pop(1)); from provisioner.perfprobe.runner import main; main()"
    done = subprocess.run([sys.executable, "-I", "-S", "-c", boot, str(REPO), "--budget", "1.5", "--blocks", "disk,cpu",
                           "--data", str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("TRAINVM_PERF=")
    doc = json.loads(line.partition("=")[2])
    from provisioner.verify.perfdoc import validate_doc

    validate_doc(doc, "probe")
    assert doc["blocks"]["loader"] == {"status": "skipped", "reason": "not requested", "metrics": {}, "info": {}}
    assert doc["blocks"]["gpu_matmul"]["reason"] == "not requested"
    assert doc["context"]["torch"]["reason"] == "torch not importable"
    assert doc["blocks"]["cpu"]["info"]["blas"] == "skipped: numpy not importable"
    assert doc["blocks"]["disk"]["status"] == "ok"
