"""The data copy tools' locks against the real PyPI: uv installs the s3 lock (the smallest) with
``--require-hashes --only-binary :all:`` into a fresh venv of this machine's Python, exactly as the data phase
does on the VM (``uv venv --python PY``, ``uv pip install ... -r LOCK``), and the copier's SDK imports. A lock
whose pin or hash PyPI no longer serves fails here. Skipped without network access to PyPI, and when this
Python is not one a lock was made for (the wheels are pure Python, but the lock pins per OS image Python).

Not covered here: the gs and az locks (compiled wheels: cryptography, cffi; ~40 MB), and the image's own
system Python (the real-OS lane, ``make test-os``, runs the script on a Debian 12 root filesystem)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# OS image -> its system Python (the locks' header lines say the same)
IMAGE_PYTHON = {"ubuntu-22.04": (3, 10), "debian-12": (3, 11), "ubuntu-24.04": (3, 12)}


def _pypi_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        socket.create_connection(("files.pythonhosted.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.mark.skipif(os.environ.get("TRAINVM_OFFLINE") == "1", reason="TRAINVM_OFFLINE=1")
def test_uv_installs_the_s3_lock_from_pypi_with_hashes(tmp_path):
    image = next((os_name for os_name, v in IMAGE_PYTHON.items() if sys.version_info[:2] == v), None)
    if image is None:
        pytest.skip(f"no data-tool lock for Python {sys.version_info[0]}.{sys.version_info[1]}")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    if not _pypi_reachable():
        pytest.skip("PyPI is not reachable")
    lock = tmp_path / "datatools-s3.txt"
    text = (REPO / f"templates/datatools/s3-{image}.txt").read_text()
    lock.write_text("".join(ln for ln in text.splitlines(True) if not ln.startswith("#")))  # as rendered
    venv = tmp_path / "s3"
    # only what the VM's script sets: no pip.conf indexes or find-links of this machine (UV_NO_CONFIG, and uv
    # reads no pip configuration), the real PyPI
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.update(UV_NO_CONFIG="1", UV_INDEX_URL="https://pypi.org/simple")
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=env, timeout=120)
    proc = subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin/python"), "--require-hashes",
                           "--only-binary", ":all:", "-r", str(lock)], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and ("connect" in proc.stderr.lower() or "dns" in proc.stderr.lower()):
        pytest.skip(f"PyPI download failed: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([str(venv / "bin/python"), "-c", "import boto3, botocore; print(boto3.__version__)"],
                         capture_output=True, text=True, check=True)
    assert f"boto3=={out.stdout.strip()} " in lock.read_text()
    # a tampered hash is refused (the check is real)
    bad = tmp_path / "bad.txt"
    pin = lock.read_text().splitlines()[0].split(" --hash=sha256:")[0]
    bad.write_text(f"{pin} --hash=sha256:{'0' * 64}\n")
    proc = subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin/python"), "--reinstall", "--no-deps",
                           "--require-hashes", "--only-binary", ":all:", "-r", str(bad)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and "hash" in proc.stderr.lower()
