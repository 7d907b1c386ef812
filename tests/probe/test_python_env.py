"""Python probe against a real throw-away interpreter (venv) holding fake dist-info folders,
a fake torch/numpy, PEP 610 direct_url.json files and a conda-meta folder."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.probe.gpu import CommandResult
from provisioner.probe.python_env import (
    ENV_SCRIPT,
    distribution_from_record,
    normalize_cudnn,
    probe_python,
    run_script,
)


def make_env(root: Path) -> tuple[Path, Path]:
    """A venv without pip: (python, site-packages)."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    python = root / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    return python, site


def add_dist(site: Path, name: str, version: str, *, installer: str | None = "pip",
             direct_url: dict | None = None) -> Path:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if installer:
        (folder / "INSTALLER").write_text(installer + "\n")
    if direct_url is not None:
        (folder / "direct_url.json").write_text(json.dumps(direct_url))
    return folder


FAKE_TORCH = '''
__version__ = "2.4.1+cu124"
class version:
    cuda = "12.4"
    hip = None
class _Cudnn:
    @staticmethod
    def is_available():
        return True
    @staticmethod
    def version():
        return 90100
class backends:
    cudnn = _Cudnn
class cuda:
    @staticmethod
    def is_available():
        return False
'''

FAKE_NUMPY = '''
__version__ = "1.26.4"
def show_config(mode="stdout"):
    return {"Build Dependencies": {"blas": {"name": "scipy-openblas", "version": "0.3.27.dev", "found": True}}}
'''


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("env")
    python, site = make_env(root)
    add_dist(site, "torch", "2.4.1+cu124")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH)
    add_dist(site, "numpy", "1.26.4")
    (site / "numpy").mkdir()
    (site / "numpy" / "__init__.py").write_text(FAKE_NUMPY)
    add_dist(site, "Transformers", "4.44.2")
    add_dist(site, "typing_extensions", "4.12.2")
    add_dist(site, "nvidia-cudnn-cu12", "9.1.0.70")
    add_dist(site, "myproject", "0.1.0", direct_url={"url": "file:///home/me/myproject", "dir_info": {"editable": True}})
    add_dist(site, "flash-attn", "2.6.3", direct_url={
        "url": "https://github.com/Dao-AILab/flash-attention/releases/download/v2.6.3/"
               "flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-cp311-cp311-linux_x86_64.whl",
        "archive_info": {"hashes": {"sha256": "00" * 32}}})
    add_dist(site, "mylib", "0.3.0", direct_url={"url": "https://github.com/me/mylib.git",
                                                 "vcs_info": {"vcs": "git", "commit_id": "a" * 40}})
    add_dist(site, "scipy", "1.13.1", installer=None)  # conda-forge builds often lack INSTALLER
    meta = root / "conda-meta"
    meta.mkdir()
    (meta / "scipy-1.13.1-py311h.json").write_text(json.dumps({
        "name": "scipy", "version": "1.13.1", "channel": "conda-forge",
        "files": ["lib/python3.11/site-packages/scipy-1.13.1.dist-info/METADATA"]}))
    (meta / "cudatoolkit-11.8.0-h6a678d5_0.json").write_text(json.dumps({
        "name": "cudatoolkit", "version": "11.8.0", "files": ["lib/libcudart.so.11.0"]}))
    return root, python, site


def test_versions_and_packages(env: tuple[Path, Path, Path]) -> None:
    root, python, _ = env
    result = probe_python(str(python))
    assert result.python == ".".join(map(str, sys.version_info[:3]))
    pkgs = result.packages()
    assert pkgs["torch"] == "2.4.1+cu124"  # local label kept
    assert pkgs["transformers"] == "4.44.2"  # canonical names
    assert pkgs["typing-extensions"] == "4.12.2"
    assert "pytest" not in pkgs  # the probed interpreter's packages, not ours
    assert result.is_conda and result.conda_packages["cudatoolkit"] == "11.8.0"
    assert result.executable and Path(result.executable).parent == root / "bin"


def test_framework_build_info(env: tuple[Path, Path, Path]) -> None:
    result = probe_python(str(env[1]))
    assert result.framework == {"name": "torch", "version": "2.4.1+cu124", "cuda": "12.4", "cudnn": "90100",
                                "cuda_available": False, "hip": None}
    assert result.blas == {"name": "scipy-openblas", "version": "0.3.27.dev"}


def test_sources(env: tuple[Path, Path, Path]) -> None:
    result = probe_python(str(env[1]))
    mine = result.dist("myproject")
    assert mine is not None and mine.editable and mine.url == "file:///home/me/myproject"
    flash = result.dist("flash_attn")
    assert flash is not None and flash.index == "https://github.com/Dao-AILab/flash-attention/releases/download/v2.6.3/"
    lib = result.dist("mylib")
    assert lib is not None and lib.vcs == "git"
    torch = result.dist("torch")
    assert torch is not None and torch.index == "https://download.pytorch.org/whl/cu124" and torch.index_inferred
    scipy = result.dist("scipy")
    assert scipy is not None and scipy.conda_package == "scipy"
    assert result.dist("transformers").notable is False  # type: ignore[union-attr]


def test_framework_crash_keeps_the_package_list(tmp_path: Path) -> None:
    python, site = make_env(tmp_path / "env")
    add_dist(site, "torch", "2.4.1+cu124")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("import os\nos.abort()\n")  # e.g. a broken libcudnn
    result = probe_python(str(python))
    assert result.framework is None
    assert result.packages() == {"torch": "2.4.1+cu124"}
    assert result.notes and "importing torch failed" in result.notes[0]


def test_import_error_falls_through_to_next_framework(tmp_path: Path) -> None:
    python, site = make_env(tmp_path / "env")
    add_dist(site, "torch", "2.4.1")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("raise ImportError('libcudnn.so.9: cannot open shared object file')")
    add_dist(site, "jax", "0.4.31")
    (site / "jax").mkdir()
    (site / "jax" / "__init__.py").write_text("__version__ = '0.4.31'\ndef default_backend():\n    return 'cpu'\n")
    result = probe_python(str(python))
    assert result.framework == {"name": "jax", "version": "0.4.31", "cuda": None, "cudnn": None, "cuda_available": False}
    assert any("libcudnn.so.9" in n for n in result.notes)


def test_missing_interpreter_is_a_note_not_a_crash(tmp_path: Path) -> None:
    result = probe_python(str(tmp_path / "nope" / "python"))
    assert result.python is None and result.distributions == ()
    assert "rc 127" in result.notes[0]


def test_garbage_output_is_a_note() -> None:
    def runner(argv: Sequence[str], timeout: float) -> CommandResult:
        return CommandResult(0, "hello\nTRAINVM_PROBE={not json\n", "")

    result = probe_python("python3", runner)
    assert result.python is None and result.notes


def test_env_script_runs_on_this_interpreter() -> None:
    done = run_script([sys.executable, "-c", ENV_SCRIPT], 60)
    assert done.returncode == 0 and "TRAINVM_PROBE=" in done.stdout


def test_legacy_egg_link_counts_as_editable() -> None:
    dist = distribution_from_record({"name": "Old_Proj", "version": "1.0", "path": "/home/me/old/old_proj.egg-info"})
    assert dist.name == "old-proj" and dist.editable and dist.url == "file:///home/me/old"


@pytest.mark.parametrize(("raw", "text"), [
    (90100, "9.1.0"), ("90100", "9.1.0"), (8902, "8.9.2"), (7605, "7.6.5"), (91002, "9.10.2"),
    ("9", "9"), ("9.1.0", "9.1.0"), (None, None), ("", None),
])
def test_normalize_cudnn(raw: object, text: str | None) -> None:
    assert normalize_cudnn(raw) == text


@given(st.integers(9, 12), st.integers(0, 99), st.integers(0, 99))
def test_normalize_cudnn_v9_encoding(major: int, minor: int, patch: int) -> None:
    assert normalize_cudnn(major * 10000 + minor * 100 + patch) == f"{major}.{minor}.{patch}"
