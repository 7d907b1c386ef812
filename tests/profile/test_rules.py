"""Every compatibility rule: at least one valid and one invalid case, built from the facts."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.compat.facts import load_facts
from provisioner.compat.rules import RULES, check_profile, compatible_gpus
from provisioner.profile.model import Profile
from tests.helpers import make_profile


def msgs(doc: dict[str, Any], level: str = "error") -> list[str]:
    return [f"{m.path}: {m.message}" for m in check_profile(Profile.model_validate(doc)) if m.level == level]


def test_valid_reference_stack_has_no_messages() -> None:
    assert msgs(make_profile({"gpu": "T4"}, cudnn="9.1.0")) == []
    assert msgs(make_profile({"gpu": "T4"}), "warning") == []


# (rule, valid profile, invalid profile, expected fragment)
CASES = [
    ("cuda-exists", make_profile({"gpu": "T4"}), make_profile({"gpu": "T4"}, cuda="12.7"), "CUDA 12.7 does not exist"),
    ("gpu-vendor", make_profile({"gpu": "T4"}), make_profile({"gpu": "MI300X"}), "AMD GPU"),
    ("gpu-cc-in-cuda", make_profile({"gpu": "V100"}, driver="535.216.03", cuda="12.2", packages=["tensorflow[and-cuda]==2.15.1"]),
     make_profile({"gpu": "K80"}, driver="470.256.02", cuda="12.2", packages=["tensorflow[and-cuda]==2.15.1"]), "outside CUDA 12.2"),
    ("gpu-driver-branch", make_profile({"gpu": "V100"}, driver="580.95.05", cuda="12.6", packages=["torch==2.7.1+cu126"]),
     make_profile({"gpu": "V100"}, driver="590.48.01", cuda="12.6", packages=["torch==2.7.1+cu126"]), "last branch for it is R580"),
    ("gpu-min-driver", make_profile({"gpu": "B200"}, driver="570.133.20", cuda="12.8", packages=["torch==2.8.0+cu128"]),
     make_profile({"gpu": "B200"}, driver="570.26", cuda="12.8", packages=["torch==2.8.0+cu128"]), "needs driver 570.133.20"),
    ("driver-cuda-floor", make_profile({"gpu": "T4"}, driver="525.60.13"), make_profile({"gpu": "T4"}, driver="470.256.02"),
     "470.256.02 is older than 525.60.13, the minimum for CUDA 12.x"),
    ("framework-build-exists", make_profile({"gpu": "T4"}), make_profile({"gpu": "T4"}, cuda="12.8", driver="570.26", packages=["torch==2.4.1+cu128"]),
     "has no +cu128 build"),
    ("framework-covers-gpu", make_profile({"gpu": "T4"}, driver="570.26", cuda="12.8", packages=["torch==2.7.1+cu128"]),
     make_profile({"gpu": "V100"}, driver="570.26", cuda="12.8", packages=["torch==2.7.1+cu128"]), "has no code for V100 (sm_70)"),
    ("framework-cuda", make_profile({"gpu": "T4"}), make_profile({"gpu": "T4"}, cuda="12.1"), "does not match torch 2.4.1+cu124"),
    ("framework-cudnn", make_profile({"gpu": "T4"}, cudnn="9.1"), make_profile({"gpu": "T4"}, cudnn="8.9.7"), "does not match cuDNN 9.1.0.70"),
    ("framework-python", make_profile({"gpu": "T4"}, python="3.12.4"), make_profile({"gpu": "T4"}, python="3.13.1"), "no wheels for Python 3.13"),
    ("framework-driver", make_profile({"gpu": "L4"}, driver="580.95.05", cuda="13.0", packages=["jax[cuda13]==0.8.0"]),
     make_profile({"gpu": "L4"}, driver="575.57.08", cuda="12.9", packages=["jax[cuda13]==0.8.0"]), "needs driver 580.65.06"),
    ("frameworks-agree", make_profile({"gpu": "T4"}, packages=["torch==2.4.1+cu124", "jax[cuda12]==0.4.35"]),
     make_profile({"gpu": "L4"}, driver="580.95.05", cuda="13.0", packages=["torch==2.11.0+cu130", "tensorflow[and-cuda]==2.15.1"]), "one VM gets one CUDA major"),
    ("gpu-memory", make_profile({"gpu": ["T4", "L4"], "min_gpu_memory_gib": 24}), make_profile({"gpu": "T4", "min_gpu_memory_gib": 24}), "has 24 GiB"),
    ("stack-has-gpu", make_profile({"min_gpu_memory_gib": 16}), make_profile({"min_gpu_memory_gib": 200}), "no cloud GPU can run this stack"),
]


@pytest.mark.parametrize("rule,valid,invalid,fragment", CASES, ids=[c[0] for c in CASES])
def test_rule_valid_and_invalid(rule: str, valid: dict[str, Any], invalid: dict[str, Any], fragment: str) -> None:
    assert rule in RULES
    assert msgs(valid) == [], msgs(valid)
    errors = msgs(invalid)
    assert any(fragment in e for e in errors), errors


def test_every_rule_has_a_case_or_a_dedicated_test() -> None:
    covered = {c[0] for c in CASES} | {"driver-toolkit-min", "framework-known", "wheel-glibc", "driver-known"}
    assert covered == set(RULES)


def test_driver_below_toolkit_minimum_is_a_warning_not_an_error() -> None:
    doc = make_profile({"gpu": "T4"}, driver="535.216.03")  # >= 12.x floor, < 550.54.14 (12.4 GA)
    assert msgs(doc) == []
    assert any("550.54.14" in w and "minor-version compatibility" in w for w in msgs(doc, "warning"))


def test_unknown_framework_release_is_a_warning() -> None:
    doc = make_profile({"gpu": "T4"}, packages=["torch==9.1.0+cu124"])
    assert msgs(doc) == []
    assert any("not in trainvm's compatibility facts" in w for w in msgs(doc, "warning"))


def test_wheel_glibc_against_os_image(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = load_facts()
    rel = facts.torch["2.4"]
    # A (hypothetical) torch build whose wheels need glibc 2.38: valid on ubuntu-24.04 (2.39), not on 22.04 (2.35).
    patched = type(rel)(rel.version, rel.python, rel.pypi_default, "2.38", rel.variants)
    monkeypatch.setitem(facts.torch, "2.4", patched)
    assert any("need glibc 2.38" in e and "2.35" in e for e in msgs(make_profile({"gpu": "T4"})))
    assert msgs(make_profile({"gpu": "T4"}, os="ubuntu-24.04")) == []


def test_sass_minor_compatibility_not_exact_match() -> None:
    # torch cu124 has sm_86 SASS but no sm_89: L4 (8.9) runs it (same major, higher minor).
    assert msgs(make_profile({"gpu": "L4"})) == []
    # sm_90 SASS does not run on 10.0 and this build has no PTX: B200 is out.
    assert "B200" not in [n for n, p in compatible_gpus(Profile.model_validate(make_profile()).stack).items() if not p]


def test_ptx_jit_covers_newer_gpu() -> None:
    from provisioner.compat.facts import ArchTarget
    from provisioner.compat.stack import sass_or_ptx_covers

    targets = (ArchTarget(90, False), ArchTarget(120, True))
    assert sass_or_ptx_covers(targets, (12, 1)) == "sm_120 SASS"
    assert sass_or_ptx_covers((ArchTarget(90, True),), (10, 0)) == "compute_90 PTX (JIT)"
    assert sass_or_ptx_covers((ArchTarget(80, False),), (9, 0)) is None


def test_plain_torch_pin_means_pypi_default_cuda() -> None:
    doc = make_profile({"gpu": "T4"}, packages=["torch==2.4.1"], cuda="12.4")
    errors = msgs(doc)
    assert any("built for CUDA 12.1" in e for e in errors), errors  # 2.4.1 on PyPI is cu121
    assert msgs(make_profile({"gpu": "T4"}, packages=["torch==2.4.1"], cuda="12.1")) == []


def test_tensorflow_without_and_cuda_warns_and_old_release_has_no_extra() -> None:
    base = {"driver": "535.216.03", "cuda": "12.2", "python": "3.11.9"}
    assert any("[and-cuda]" in w for w in msgs(make_profile({"gpu": "T4"}, packages=["tensorflow==2.15.1"], **base), "warning"))
    old = make_profile({"gpu": "T4"}, packages=["tensorflow[and-cuda]==2.13.1"], driver="535.216.03", cuda="11.8", python="3.11.9")
    assert any("has no [and-cuda] extra" in e for e in msgs(old))


def test_jax_needs_an_extra_and_matching_cuda_major() -> None:
    assert any("CPU-only jaxlib" in e for e in msgs(make_profile({"gpu": "T4"}, packages=["jax==0.4.35"])))
    bad = make_profile({"gpu": "T4"}, packages=["jax[cuda13]==0.8.0"], driver="580.95.05", cuda="12.8")
    assert any("CUDA >= 13.0" in e for e in msgs(bad))


def test_torch_cpu_and_rocm_labels_rejected() -> None:
    assert any("CPU-only build" in e for e in msgs(make_profile({"gpu": "T4"}, packages=["torch==2.4.1+cpu"])))
    assert any("rocm6.1 build" in e for e in msgs(make_profile({"gpu": "T4"}, packages=["torch==2.4.1+rocm6.1"])))


def test_partly_incompatible_gpu_list_warns_and_plan_skips() -> None:
    doc = make_profile({"gpu": ["V100", "T4"]}, driver="570.26", cuda="12.8", packages=["torch==2.7.1+cu128"])
    assert msgs(doc) == []
    assert any("plan skips V100" in w for w in msgs(doc, "warning"))


def test_compatible_gpus_for_the_planner() -> None:
    stack = Profile.model_validate(make_profile()).stack
    table = compatible_gpus(stack)
    ok = {n for n, p in table.items() if not p}
    assert {"T4", "L4", "A100", "H100", "V100", "P100"} <= ok
    assert {"K80", "B200", "MI300X", "MI25"}.isdisjoint(ok)
    assert all(m.source for n in ("K80", "B200") for m in table[n])


def test_messages_cite_sources() -> None:
    for _, _, invalid, _ in CASES:
        for m in check_profile(Profile.model_validate(invalid)):
            if m.level == "error" and m.path != "hardware":
                assert m.source or "one VM gets one CUDA major" in m.message, m


def test_driver_newer_than_the_facts_is_a_warning() -> None:
    doc = make_profile({"gpu": "L4"}, driver="610.10.01", cuda="13.0", packages=["torch==2.11.0+cu130"], python="3.12.7")
    assert msgs(doc) == []
    assert any("newer than every driver branch" in w and "R595" in w for w in msgs(doc, "warning"))
    assert not any("newer than every" in w for w in msgs(make_profile({"gpu": "T4"}), "warning"))
