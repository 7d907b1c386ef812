"""The compatibility facts files are validated by pydantic models (provisioner/compat/facts_schema.py):
``TRAINVM_FACTS_DIR`` points trainvm at a user's own facts, so a malformed file is input, reported as
``file:line: field: message`` (exit 2) instead of a KeyError/TypeError traceback from deep in a rule. The bundled
facts load to exactly the tables the hand mapping built (kept below as the reference)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from provisioner.compat import facts as F
from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


@pytest.fixture
def facts_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the bundled facts that TRAINVM_FACTS_DIR points at (the parse cache off, the process cache cleared)."""
    folder = tmp_path / "facts"
    shutil.copytree(F.DATA_DIR, folder)
    monkeypatch.setenv("TRAINVM_FACTS_DIR", str(folder))
    monkeypatch.setenv("TRAINVM_NO_CACHE", "1")
    F.load_facts.cache_clear()
    yield folder
    F.load_facts.cache_clear()


def edit(path: Path, old: str, new: str) -> int:
    """Replace ``old`` (once) in ``path``; the 1-based line it was on."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")
    return text[: text.index(old)].count("\n") + 1


@pytest.mark.parametrize(("file", "old", "new", "field", "message"), [
    ("cuda.yaml", '"12.4": {min_driver: "550.54.14",', '"12.4": {min_driver: 550,', "releases.12.4.min_driver",
     "Input should be a valid string"),
    ("gpus.yaml", "T4:        {vendor: nvidia, cc: \"7.5\",  arch: Turing,    memory_gib: 16,",
     "T4:        {vendor: nvidia, cc: \"7.5\",  arch: Turing,    memory_gb: 16,", "gpus.T4.memory_gb", "unknown key"),
    ("gpus.yaml", "T4:        {vendor: nvidia, cc: \"7.5\",", "T4:        {vendor: nvidia, cc: \"seven\",", "gpus.T4.cc",
     "String should match pattern"),
    ("os.yaml", "    nvidia_repo: debian12\n", "", "os.debian-12.nvidia_repo", "required field is missing"),
    ("torch.yaml", "cu117: {arch: [37, 50, 60, 70, 75, 80, 86], cudnn: \"8.5.0.96\"}\n  \"2.0\":",
     "cu117: {arch: [37, banana], cudnn: \"8.5.0.96\"}\n  \"2.0\":", "versions.1.13.variants.cu117.arch", "not an arch list"),
    ("jax.yaml", '{versions: ">=0.11.0", python_min: "3.12"}', '{versions: "newer than 0.11", python_min: "3.12"}',
     "python_floor.0.versions", "not a version specifier"),
])
def test_a_malformed_facts_file_is_a_located_input_error(cli, facts_dir, file, old, new, field, message) -> None:
    line = edit(facts_dir / file, old, new)
    r = cli("validate", T4)
    assert r.code == 2, r.err
    assert "Traceback" not in r.err
    found = [ln for ln in r.err.splitlines() if f": {field}: " in ln]
    assert found, r.err
    assert f"{facts_dir / file}:" in found[0] and message in found[0], found[0]
    got_line = int(found[0].split(f"{file}:")[1].split(":")[0])
    assert line - 2 <= got_line <= line  # the key's line, or its parent's for a missing key


def test_an_unquoted_version_is_refused_not_read_as_a_number(cli, facts_dir) -> None:
    """``glibc: 2.30`` would be the float 2.3: another version. The old mapping passed it on as a float."""
    edit(facts_dir / "os.yaml", 'glibc: "2.36"', "glibc: 2.30")
    r = cli("validate", T4)
    assert r.code == 2 and "os.yaml:" in r.err and "os.debian-12.glibc: Input should be a valid string" in r.err


def test_a_missing_or_unparsable_facts_file_is_an_input_error(cli, facts_dir) -> None:
    (facts_dir / "jax.yaml").unlink()
    r = cli("validate", T4)
    assert r.code == 2 and f"{facts_dir / 'jax.yaml'}: cannot read the facts file" in r.err and "Traceback" not in r.err
    F.load_facts.cache_clear()
    shutil.copy(F.DATA_DIR / "jax.yaml", facts_dir / "jax.yaml")
    line = edit(facts_dir / "os.yaml", "  debian-12:\n", "  debian-12: [\n")
    r = cli("validate", T4)
    assert r.code == 2 and f"{facts_dir / 'os.yaml'}:" in r.err and "YAML syntax error" in r.err, r.err
    assert line <= int(r.err.split("os.yaml:")[1].split(":")[0]) <= line + 3


def test_a_valid_user_facts_folder_is_used(cli, facts_dir) -> None:
    """Adding a GPU to one's own facts works (the models are no stricter than the data trainvm ships)."""
    edit(facts_dir / "gpus.yaml", "  T4:", '  X1:        {vendor: nvidia, cc: 9.0, arch: Hopper, memory_gib: 96.5, modules: open}\n  T4:')
    got = F.load_facts()
    assert got.gpus["X1"].cc == (9, 0) and got.gpus["X1"].memory_gib == 96.5 and got.gpus["X1"].cloud
    assert cli("validate", T4).code == 0


def test_the_bundled_facts_load_to_exactly_what_the_hand_mapping_built(monkeypatch) -> None:
    monkeypatch.setenv("TRAINVM_NO_CACHE", "1")
    monkeypatch.delenv("TRAINVM_FACTS_DIR", raising=False)
    assert F._parse_facts() == _hand_mapped()
    assert F.load_facts() == _hand_mapped()  # the process (and disk) cached value too


def _load(name: str) -> dict[str, Any]:
    from ruamel.yaml import YAML

    with (F.DATA_DIR / f"{name}.yaml").open(encoding="utf-8") as fh:
        return YAML(typ="safe").load(fh)


# ----- the hand mapping compat/facts.py had before the models (commit 96b3156), verbatim but for the F. prefixes
def _hand_mapped() -> F.Facts:
    gpus_doc, cuda_doc, torch_doc = _load("gpus"), _load("cuda"), _load("torch")
    tf_doc, jax_doc, os_doc = _load("tensorflow"), _load("jax"), _load("os")
    gpus = {
        name: F.GpuFact(
            name=name,
            vendor=g["vendor"],
            arch=g["arch"],
            memory_gib=float(g["memory_gib"]),
            cc=F._cc_or_none(g.get("cc")),
            last_branch=g.get("last_branch"),
            min_driver=g.get("min_driver"),
            modules=g.get("modules"),
            cloud=g.get("cloud", True),
        )
        for name, g in gpus_doc["gpus"].items()
    }
    releases = {
        v: F.CudaRelease(v, r["min_driver"], F.cc_tuple(r["cc"][0]), F.cc_tuple(r["cc"][1]))
        for v, r in cuda_doc["releases"].items()
    }
    torch = {}
    tsrc, tfsrc, jsrc = torch_doc["sources"], tf_doc["sources"], jax_doc["sources"]
    for v, r in torch_doc["versions"].items():
        variants = {
            name: F.TorchVariant(
                name, F.variant_cuda(name), F.parse_arch(d["arch"]) or (), d.get("cudnn"),
                F._source(d.get("arch_source") or r.get("arch_source"), tsrc),
            )
            for name, d in r["variants"].items()
        }
        torch[v] = F.TorchRelease(v, tuple(r["python"]), r["pypi_default"], r["glibc"], variants)
    tf = {
        v: F.TensorflowRelease(
            v, tuple(r["python"]), r["cuda"], r["cudnn"], F._cc_or_none(r.get("min_cc")),
            F._cc_or_none(r.get("ptx")), r["glibc"], bool(r.get("and_cuda")),
            F.parse_arch(r.get("arch")), F._source(r.get("arch_source"), tfsrc),
        )
        for v, r in tf_doc["versions"].items()
    }
    jax_extras = {
        n: F.JaxExtra(n, e["cuda_major"], e["min_cuda"], e["min_driver"], F.cc_tuple(e["min_cc"]), tuple(e["cudnn"]),
                    F.parse_arch(e.get("arch")), F._source(e.get("arch_source"), jsrc))
        for n, e in jax_doc["extras"].items()
    }
    os_images = {
        n: F.OsImage(n, o["glibc"], o["nvidia_repo"])
        for n, o in os_doc["os"].items()
    }
    return F.Facts(
        gpus=gpus,
        gpu_aliases=dict(gpus_doc.get("aliases") or {}),
        gpu_sources=gpus_doc["sources"],
        cuda_families={k: v["floor"] for k, v in cuda_doc["families"].items()},
        cuda_releases=releases,
        cuda_sources=cuda_doc["sources"],
        torch=torch,
        torch_sources=torch_doc["sources"],
        tensorflow=tf,
        tf_sources=tf_doc["sources"],
        jax_extras=jax_extras,
        jax_python_floor=tuple((p["versions"], p["python_min"]) for p in jax_doc["python_floor"]),
        jax_glibc=str(jax_doc["glibc"]),
        jax_sources=jax_doc["sources"],
        os_images=os_images,
        os_sources=os_doc["sources"],
    )
