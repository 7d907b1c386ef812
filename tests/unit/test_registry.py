"""The cloud registry (providers/registry.py) is the one place that says what a cloud is: the tables that
other layers still keep must agree with it, and nothing outside providers/ may grow a cloud-name branch."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from ruamel.yaml import YAML

from provisioner.catalog import families as F
from provisioner.providers import PROVIDERS
from provisioner.providers.registry import (
    CLOUD_NAMES,
    CLOUDS,
    OS_NAMES,
    AmiParameter,
    AzureImage,
    CloudName,
    GceImage,
    OsName,
    cloud,
    image_refs,
    provisionable_clouds,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "provisioner" / "compat" / "data"


def _yaml(name: str) -> dict:
    return YAML(typ="safe").load((DATA / name).read_text())


def test_literal_spellings_match_the_table() -> None:
    assert get_args(CloudName) == tuple(CLOUDS) == CLOUD_NAMES
    assert get_args(OsName) == OS_NAMES
    assert all(name == spec.name for name, spec in CLOUDS.items())


def test_every_os_in_the_facts_has_an_image_on_every_cloud() -> None:
    os_doc = _yaml("os.yaml")["os"]
    assert tuple(os_doc) == OS_NAMES
    kinds = {"gcp": GceImage, "azure": AzureImage, "aws": AmiParameter}
    for spec in CLOUDS.values():
        assert set(spec.os_images) == set(OS_NAMES) == set(spec.os_arches), spec.name
        assert all(isinstance(ref, kinds[spec.name]) for ref in spec.os_images.values())
    # the facts keep glibc and the NVIDIA repo only: one source for image references
    assert not any({"gcp", "azure", "aws"} & set(o) for o in os_doc.values())


def test_image_references_are_well_formed() -> None:
    for os_name in OS_NAMES:
        gce = cloud("gcp").os_images[os_name]
        assert isinstance(gce, GceImage) and gce.project.endswith("-cloud") and gce.family
        az = cloud("azure").os_images[os_name]
        assert isinstance(az, AzureImage) and az.gen1_sku and az.gen1_sku != az.sku
        ami = cloud("aws").os_images[os_name]
        assert isinstance(ami, AmiParameter) and ami.ssm_parameter.startswith("/aws/service/")
    assert set(image_refs("debian-12")) == set(CLOUD_NAMES)


def test_aws_request_builder_uses_the_registry_ami_parameters() -> None:
    from provisioner.providers.aws import request as aws_request

    params = getattr(aws_request, "AMI_PARAMETERS", None)
    if params is not None:
        assert dict(params) == {o: ref.ssm_parameter for o, ref in cloud("aws").os_images.items()}  # type: ignore[union-attr]


def test_documented_user_data_limits() -> None:
    # GCE: 256 KiB per metadata value; Azure: customData 64 KiB raw = 87,380 base64 characters; EC2: 16 KB raw
    assert cloud("gcp").user_data.limit == 256 * 1024
    assert cloud("azure").user_data.limit == 87_380
    assert cloud("aws").user_data.limit == 16_384
    assert {c.user_data.encoding for c in CLOUDS.values()} == {"plain", "base64"}


def test_disk_maps_cover_every_profile_disk_type() -> None:
    for spec in CLOUDS.values():
        assert set(spec.disk_types) == {"standard", "balanced", "ssd"}, spec.name
    # EBS st1/sc1 cannot be boot volumes; io1/io2 need Iops: the AWS map never names them
    assert not {"st1", "sc1", "io1", "io2"} & set(cloud("aws").disk_types.values())
    assert not hasattr(F, "AWS_DISK_MAP") and not hasattr(F, "AZURE_DISK_MAP")


def test_gpu_memory_tables_agree() -> None:
    gpus = _yaml("gpus.yaml")["gpus"]
    for name, gib in F.GPU_MEMORY_GIB.items():
        if name in gpus:
            assert float(gpus[name]["memory_gib"]) == float(gib), name
    assert len(set(F.GPU_MEMORY_GIB) & set(gpus)) >= 15  # the comparison above covers the catalog's GPUs


def test_provisionable_clouds_are_the_registered_providers() -> None:
    assert tuple(PROVIDERS) == provisionable_clouds()
    for name, target in PROVIDERS.items():
        module, _, cls = target.partition(":")
        assert module.startswith("provisioner.providers.") and cls, name


def test_render_refuses_what_validate_refuses() -> None:
    from provisioner.profile import fields
    from provisioner.render import context

    assert context.UNSAFE_ENV_KEYS is fields.DANGEROUS_ENV_KEYS
    assert context._NO_DATA_UNDER is fields.RESERVED_DIRS
    assert {"LD_LIBRARY_PATH", "PYTHONPATH", "PATH", "HOME"} <= context.UNSAFE_ENV_KEYS
    assert {"/root", "/tmp"} <= set(context._NO_DATA_UNDER)



def test_one_memory_tolerance_for_the_rendered_check_and_verify() -> None:
    import importlib

    from provisioner.compat import facts
    from provisioner.verify.expect import expectation

    compare = importlib.import_module("provisioner.verify.compare")  # the package exports a function of that name
    # the rendered check reads it from expected.json: the expectation verify builds
    doc = {"stack": {"packages": []}, "hardware": {}}
    assert expectation(doc)["tolerance"] is compare.NOMINAL_TOLERANCE is facts.NOMINAL_TOLERANCE


def test_importing_the_registry_imports_no_cloud_sdk() -> None:
    code = ("import sys, provisioner.providers.registry, provisioner.providers.lifecycle; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('google', 'azure', 'boto3', 'botocore')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# Quoted cloud names outside providers/ (the registry's table is the one place): the catalog's per-cloud
# machine-family checks (storage.py; families.py's family_of, moved from providers/placement.py so that the shared
# providers layer imports nothing of the catalog), the render package's docstring example and the JSON-schema example of placement.identity
# (a mapping keyed by cloud; its check is the registry's identity_check) are the only ones left.
ALLOWED = {"provisioner/catalog/storage.py": 2, "provisioner/catalog/families.py": 2, "provisioner/render/__init__.py": 1, "provisioner/profile/model.py": 1}


def test_no_new_cloud_name_branches_outside_providers() -> None:
    found: dict[str, int] = {}
    rx = re.compile(r"""["'](gcp|azure|aws)["']""")
    for path in sorted((ROOT / "provisioner").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("provisioner/providers/"):
            continue
        n = len(rx.findall(path.read_text()))
        if n:
            found[rel] = n
    assert found == ALLOWED


@pytest.mark.parametrize("option", ["Only these clouds (repeatable): ", "Only this cloud (", "Only look on this cloud ("])
def test_cli_help_names_the_registry_clouds(option: str) -> None:
    # the help strings stay literal (importing the registry would cost `trainvm --help` time): keep them in step
    text = (ROOT / "provisioner" / "cli.py").read_text()
    line = next(ln for ln in text.splitlines() if option in ln)
    named = re.findall(r"\b(gcp|azure|aws)\b", line)
    expected = CLOUD_NAMES if "these clouds" in option else provisionable_clouds()
    assert tuple(named) == expected
