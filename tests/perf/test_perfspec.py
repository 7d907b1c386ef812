"""The published-figures table (provisioner/compat/data/gpu_perf.yaml)."""

from __future__ import annotations

import pytest
from ruamel.yaml import YAML

from provisioner.compat.facts import facts_dir
from provisioner.verify.perfspec import load_specs, spec_for


def test_every_entry_cites_a_source_url_and_sparse_figures_are_twice_dense() -> None:
    doc = YAML(typ="safe").load((facts_dir() / "gpu_perf.yaml").read_text())
    for name, entries in doc["gpus"].items():
        for e in entries:
            assert "https://" in e["source"], (name, e["variant"])
            for key in ("tf32", "bf16", "fp16"):
                if f"sparse_{key}" in e:
                    # the L40S sheet itself prints 362.05 dense beside 733 sparse (1.2 % apart)
                    assert e[f"sparse_{key}"] == pytest.approx(2 * e[key], rel=0.015), (name, e["variant"], key)


@pytest.mark.parametrize(("product", "mem", "variant", "bf16"), [
    ("NVIDIA H100 80GB HBM3", None, "H100 SXM5 80GB", 989.5),
    ("NVIDIA H100 NVL", None, "H100 NVL 94GB", 835.5),
    ("NVIDIA H100 PCIe", None, "H100 PCIe 80GB", 756.5),
    ("NVIDIA A100-SXM4-80GB", None, "A100 80GB SXM4", 312),
    ("NVIDIA A100 80GB PCIe", None, "A100 80GB PCIe", 312),
    ("NVIDIA L4", None, "L4", 121),
    ("NVIDIA L40S", None, "L40S", 362.05),
    ("Tesla T4", None, "T4", None),
    ("Tesla V100-SXM2-16GB", None, "V100 SXM2", None),
])
def test_product_names_pick_the_right_form_factor(product: str, mem: int | None, variant: str, bf16: float | None) -> None:
    spec = spec_for(product, mem)
    assert spec is not None and spec.variant == variant and spec.figure("bf16") == bf16


def test_unknown_part_has_no_spec() -> None:
    assert spec_for("NVIDIA A10G") is None and spec_for("NVIDIA GeForce RTX 4090") is None


def test_table_names_are_canonical_gpu_names() -> None:
    from provisioner.compat.facts import load_facts

    assert set(load_specs()) <= set(load_facts().gpus)
