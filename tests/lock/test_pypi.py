"""Opt-in: `trainvm lock` against pypi.org itself (network). Skipped by default; run with
``TRAINVM_TEST_PYPI=1 .venv/bin/python -m pytest -m pypi tests/lock -n 0``."""

from __future__ import annotations

import pytest

from provisioner.lock.model import read_lock

pytestmark = pytest.mark.pypi


def test_a_real_torch_free_closure_from_pypi(write_yaml, cli, profile_doc) -> None:
    path = write_yaml(profile_doc(["requests==2.32.3", "numpy==2.1.3"]))
    r = cli("lock", str(path))
    assert r.code == 0, r.err
    lock = read_lock(path.with_suffix(".lock"))
    versions = lock.versions()
    assert {"requests", "numpy", "certifi", "idna", "urllib3", "charset-normalizer"} <= set(versions)
    numpy = next(p for p in lock.packages if p.name == "numpy")
    assert "cp311" in numpy.filename and "manylinux" in numpy.filename and numpy.size and numpy.size > 1_000_000
    assert all(len(p.sha256) == 64 and p.url.startswith("https://files.pythonhosted.org/") for p in lock.packages)


def test_tensorflow_datasets_4_9_6_cannot_lock_because_of_promise(write_yaml, cli, profile_doc) -> None:
    r = cli("lock", str(write_yaml(profile_doc(["tensorflow-datasets==4.9.6"]))))
    assert r.code == 1 and "promise" in r.err and "tensorflow-datasets==4.9.6" in r.err
