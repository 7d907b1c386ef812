"""Framework builds are judged by their own SASS/PTX arch lists (provisioner/compat/data/*.yaml), not by the
CUDA toolkit's nvcc range: SASS for sm_X.Z runs on X.Y when Z <= Y (same major), PTX compute_A.B is JIT-compiled
for any newer GPU (a warning: slower first start), arch-specific sm_90a/sm_100a SASS runs only on that exact CC."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.compat.facts import ArchTarget, load_facts
from provisioner.compat.rules import check_profile, compatible_gpus
from provisioner.compat.stack import sass_or_ptx_covers
from provisioner.profile.model import Profile
from tests.helpers import make_profile

OLD_TORCH = {"driver": "535.216.03", "python": "3.10.14"}  # R535 runs CUDA 11.x and drives L4/H100


def messages(doc: dict[str, Any], level: str) -> list[str]:
    return [f"{m.path}: {m.message}" for m in check_profile(Profile.model_validate(doc)) if m.level == level]


def _yaml(gpu: str, cuda: str, package: str, **extra: str) -> str:
    lines = [f"name: t\nhardware:\n  gpu: {gpu}\nstack:\n  os: ubuntu-22.04\n  driver: '{OLD_TORCH['driver']}'\n  cuda: '{cuda}'",
             f"  python: {OLD_TORCH['python']}\n  packages: ['{package}']"]
    lines += [f"  {k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("gpu", ["L4", "L40S"])
def test_cli_validate_accepts_torch_1_13_cu116_on_ada(cli, write_yaml, gpu: str) -> None:
    """torch 1.13.1+cu116 carries sm_80/sm_86 SASS (pytorch/builder TORCH_CUDA_ARCH_LIST "3.7;5.0;6.0;7.0;7.5;8.0;8.6"):
    an 8.9 GPU runs sm_86 SASS (binary compatibility). CUDA 11.6's nvcc cannot target 8.9, which used to refuse it."""
    r = cli("validate", str(write_yaml(_yaml(gpu, "11.6", "torch==1.13.1+cu116"))))
    assert r.code == 0, r.out + r.err
    assert "valid (hash" in r.out and "outside CUDA 11.6" not in r.err


def test_cli_validate_still_refuses_torch_2_0_cu117_on_h100(cli, write_yaml) -> None:
    """No sm_90 SASS and no PTX in the cu117 build: an H100 (9.0) has nothing to run (sm_86 is another major)."""
    r = cli("validate", str(write_yaml(_yaml("H100", "11.7", "torch==2.0.1+cu117"))))
    assert r.code == 1
    assert "has no code for H100 (sm_90)" in r.out + r.err


def test_sass_runs_on_same_major_higher_minor_only() -> None:
    sm80 = (ArchTarget.parse("sm_80"),)
    assert sass_or_ptx_covers(sm80, (8, 6)) == "sm_80 SASS"  # A10G
    assert sass_or_ptx_covers(sm80, (8, 9)) == "sm_80 SASS"  # L4
    assert sass_or_ptx_covers((ArchTarget.parse("sm_86"),), (8, 0)) is None  # A100 is older than sm_86
    assert sass_or_ptx_covers(sm80, (9, 0)) is None  # H100: another major
    assert sass_or_ptx_covers((ArchTarget.parse("sm_90"),), (9, 0)) == "sm_90 SASS"


def test_ptx_is_jit_for_newer_gpus_only() -> None:
    compute90 = (ArchTarget.parse("compute_90"),)  # TF/XLA notation: sm_90 SASS and compute_90 PTX
    assert sass_or_ptx_covers(compute90, (9, 0)) == "sm_90 SASS"
    assert sass_or_ptx_covers(compute90, (10, 0)) == "compute_90 PTX (JIT)"
    assert sass_or_ptx_covers(compute90, (8, 9)) is None
    assert sass_or_ptx_covers((ArchTarget.parse("8.6+PTX"),), (9, 0)) == "compute_86 PTX (JIT)"


def test_arch_specific_variants_are_not_forward_compatible() -> None:
    """sm_90a/sm_100a (arch-specific features) run only on exactly 9.0 / 10.0 (NVIDIA CUDA programming guide)."""
    assert sass_or_ptx_covers((ArchTarget.parse("sm_90a"),), (9, 0)) == "sm_90a SASS"
    assert sass_or_ptx_covers((ArchTarget.parse("sm_100a"),), (10, 3)) is None
    assert sass_or_ptx_covers((ArchTarget.parse("9.0a"),), (9, 1)) is None


def test_every_framework_build_records_its_arch_list_with_a_source() -> None:
    facts = load_facts()
    for rel in facts.torch.values():
        for v in rel.variants.values():
            assert v.arch and v.arch_source, (rel.version, v.name)
    for extra in facts.jax_extras.values():
        assert extra.arch and extra.arch_source
    recorded = [tf for tf in facts.tensorflow.values() if tf.arch is not None]
    assert recorded and all(tf.arch_source for tf in recorded)


def test_torch_cu117_on_l4_and_a10g_is_accepted_and_on_a100_native() -> None:
    for gpu in ("L4", "A10G", "A100"):
        doc = make_profile({"gpu": gpu}, cuda="11.7", packages=["torch==2.0.1+cu117"], **OLD_TORCH)
        assert messages(doc, "error") == [], (gpu, messages(doc, "error"))


def test_planner_offers_ada_for_an_old_build_and_not_hopper() -> None:
    stack = Profile.model_validate(make_profile(cuda="11.7", packages=["torch==2.0.1+cu117"], **OLD_TORCH)).stack
    ok = {n for n, p in compatible_gpus(stack).items() if not p}
    assert {"L4", "L40S", "A10G", "A100", "T4"} <= ok
    assert {"H100", "H200", "B200"}.isdisjoint(ok)


def test_tensorflow_2_11_runs_on_l4_by_binary_compat_but_not_on_h100() -> None:
    """TF 2.11 wheels: sm_35,sm_50,sm_60,sm_70,sm_75,compute_80 (tf.sysconfig.get_build_info()). L4 (8.9) runs the
    sm_80 SASS; H100 (9.0) is a newer major than CUDA 11.2 knows: TF's own compute_80 PTX could JIT, but nothing
    records that CUDA 11.2's libraries (cuBLAS, cuDNN 8.1) do, so the toolkit range still refuses it."""
    base = {"driver": "535.216.03", "cuda": "11.2", "python": "3.10.14", "packages": ["tensorflow==2.11.1"], "cuda_toolkit": True}
    assert messages(make_profile({"gpu": "L4"}, **base), "error") == []
    l4_warnings = messages(make_profile({"gpu": "L4"}, **base), "warning")
    assert not any("JIT-compiles" in w for w in l4_warnings)
    # cuda_toolkit: true installs nvcc 11.2, which cannot target 8.9: code the user compiles runs as older SASS/PTX
    assert any("newer than CUDA 11.2's nvcc" in w for w in l4_warnings), l4_warnings
    assert any("outside CUDA 11.2" in e for e in messages(make_profile({"gpu": "H100"}, **base), "error"))


def test_ptx_only_coverage_is_accepted_with_a_jit_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build with sm_80 SASS and compute_86 PTX (TORCH_CUDA_ARCH_LIST "8.0;8.6+PTX", as many extension builds
    use) on an H100 under CUDA 11.8 (whose range reaches 9.0): no sm_9x SASS, so the driver JIT-compiles the PTX."""
    facts = load_facts()
    rel = facts.torch["2.0"]
    variant = rel.variants["cu118"]._replace(arch=(ArchTarget.parse("8.0"), ArchTarget.parse("8.6+PTX")))
    monkeypatch.setitem(facts.torch, "2.0", rel._replace(variants={**rel.variants, "cu118": variant}))
    h100 = make_profile({"gpu": "H100"}, cuda="11.8", packages=["torch==2.0.1+cu118"], **OLD_TORCH)
    assert messages(h100, "error") == []
    assert any("JIT-compiles its compute_86 PTX" in w for w in messages(h100, "warning"))
    a100 = make_profile({"gpu": "A100"}, cuda="11.8", packages=["torch==2.0.1+cu118"], **OLD_TORCH)
    assert not any("JIT" in w for w in messages(a100, "warning"))


def test_unknown_arch_list_keeps_the_toolkit_range_check() -> None:
    """TF 2.12's arch list is not recorded: nothing proves the build has code for a B200 (10.0), above CUDA 11.8's
    range (max 9.0), so the toolkit range still refuses it."""
    doc = make_profile({"gpu": "B200"}, driver="570.133.20", cuda="11.8", python="3.10.14",
                       packages=["tensorflow==2.12.1"], cuda_toolkit=True)
    assert any("outside CUDA 11.8" in e for e in messages(doc, "error"))


def test_below_the_toolkit_floor_is_still_refused() -> None:
    doc = make_profile({"gpu": "K80"}, driver="470.256.02", cuda="12.2", packages=["tensorflow[and-cuda]==2.15.1"])
    assert any("outside CUDA 12.2" in e for e in messages(doc, "error"))
