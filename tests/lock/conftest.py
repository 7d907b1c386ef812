"""Fixtures for the lock tests: a local package index (see wheelhouse.py) served on 127.0.0.1,
a torch-like CUDA index beside it, and profiles that pin from them. Real ``uv`` does the work."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_spec = importlib.util.spec_from_file_location("trainvm_wheelhouse", Path(__file__).with_name("wheelhouse.py"))
wheelhouse = importlib.util.module_from_spec(_spec)
sys.modules["trainvm_wheelhouse"] = wheelhouse
_spec.loader.exec_module(wheelhouse)
_spec = importlib.util.spec_from_file_location("trainvm_fakerepo_lock", Path(__file__).parents[1] / "aptsim" / "fakerepo.py")
fakerepo = importlib.util.module_from_spec(_spec)
sys.modules["trainvm_fakerepo_lock"] = fakerepo
_spec.loader.exec_module(fakerepo)

#: the driver the test profiles pin, and a second revision of its metapackage published later
DRIVER = "550.127.05"

ANY = "py3-none-any"
PYPI_DISTS = [
    ("alpha", "1.0", ("beta>=1",), ANY),
    ("beta", "1.0", (), ANY),
    ("beta", "1.2", (), ANY),
    ("gamma", "2.0", ("delta==0.5",), ANY),  # needs an sdist-only package
    # one wheel per platform flavour: the target picks its best tag
    ("multi", "1.0", (), "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"),
    ("multi", "1.0", (), "cp311-cp311-macosx_11_0_arm64"),
    ("multi", "1.0", (), ANY),
    ("newglibc", "1.0", (), "cp311-cp311-manylinux_2_39_x86_64"),
    ("only312", "1.0", (), "cp312-cp312-manylinux_2_17_x86_64"),
    ("nvidia-cublas-cu12", "12.4.5.8", (), "py3-none-manylinux2014_x86_64"),
    ("torch", "2.4.1", ("nvidia-cublas-cu12==12.4.5.8",), "cp311-cp311-manylinux1_x86_64"),
]
PYPI_SDISTS = [("promise", "2.3"), ("delta", "0.5")]
TORCH_DISTS = [
    ("torch", "2.4.1+cu124", ("nvidia-cublas-cu12==12.4.5.8", "beta"), "cp311-cp311-linux_x86_64"),
    ("nvidia-cublas-cu12", "12.4.5.8", (), "py3-none-manylinux2014_x86_64"),
    ("beta", "9.9", (), ANY),  # the PyTorch index also mirrors ordinary packages: they must not come from it
]


@dataclass(frozen=True)
class Indexes:
    pypi: str
    torch: str
    root: Path


@pytest.fixture(scope="session")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Indexes]:
    root = tmp_path_factory.mktemp("index")
    wheelhouse.make_index(root / "pypi", PYPI_DISTS, PYPI_SDISTS)
    wheelhouse.make_index(root / "torch", TORCH_DISTS)
    with wheelhouse.serve(root) as base:
        yield Indexes(f"{base}/pypi/simple", f"{base}/torch/simple", root)


def driver_index_text(versions: list[str], extra_revision: bool = True) -> str:
    """A Packages index of NVIDIA's repository for ``versions`` (tests/aptsim/fakerepo.py: Debian's real
    driver packaging renumbered, NVIDIA's top-level names modelled), plus, with ``extra_revision``, a
    ``-2`` revision of nvidia-open at the first version (a republished package)."""
    stanzas = fakerepo.nvidia_stanzas(versions)
    if extra_revision:
        first = next(st for st in stanzas if st["Package"] == "nvidia-open" and st["Version"] == f"{versions[0]}-1")
        stanzas.append({**first, "Version": f"{versions[0]}-2"})
    return fakerepo.dump(stanzas)


@pytest.fixture(scope="session")
def driver_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import gzip

    path = tmp_path_factory.mktemp("nvidia-index") / "Packages.gz"
    path.write_bytes(gzip.compress(driver_index_text([DRIVER, "560.35.03"]).encode()))
    return path


@pytest.fixture
def make_driver_index(tmp_path: Path) -> Callable[..., Path]:
    """``make_driver_index(["560.35.03"])``: a gzipped Packages index with those driver versions."""
    import gzip

    def make(versions: list[str], extra_revision: bool = False) -> Path:
        path = tmp_path / "nvidia-index" / "Packages.gz"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(gzip.compress(driver_index_text(versions, extra_revision).encode()))
        return path

    return make


@pytest.fixture(autouse=True)
def _driver_index_env(driver_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINVM_DRIVER_INDEX_URL", str(driver_index))


def _profile_doc(packages: list[str], **stack: Any) -> dict[str, Any]:
    return {"name": "tiny", "stack": {"os": "ubuntu-22.04", "driver": DRIVER, "python": "3.11.9", "packages": packages, **stack}}


@pytest.fixture
def profile_doc() -> Callable[..., dict[str, Any]]:
    """``profile_doc(["alpha==1.0"], os="debian-12")``: a minimal profile document."""
    return _profile_doc


@pytest.fixture
def lock_cli(cli: Callable[..., Any], indexes: Indexes) -> Callable[..., Any]:
    """``trainvm lock PROFILE ...`` against the local indexes."""

    def run(profile: Path, *args: str) -> Any:
        return cli("lock", str(profile), "--index-url", indexes.pypi, "--torch-index-url", indexes.torch, *args)

    return run


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("TRAINVM_TEST_PYPI"):
        return
    skip = pytest.mark.skip(reason="talks to pypi.org; run with TRAINVM_TEST_PYPI=1 pytest -m pypi tests/lock")
    for item in items:
        if "pypi" in item.keywords:
            item.add_marker(skip)
