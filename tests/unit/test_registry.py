"""The cloud registry (providers/registry.py) is the one place that says what a cloud is: the tables that
other layers still keep must agree with it, and nothing outside providers/ may grow a cloud-name branch."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

from ruamel.yaml import YAML

from provisioner.catalog import families as F
from provisioner.providers.registry import (
    CLOUD_NAMES,
    CLOUDS,
    OS_NAMES,
    AmiParameter,
    AzureImage,
    CloudName,
    GceImage,
    LocalImage,
    OsName,
    cloud,
    image_refs,
    provisionable_clouds,
)
from provisioner.settings import SETTINGS

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
    kinds = {"gcp": GceImage, "azure": AzureImage, "aws": AmiParameter, "local": LocalImage}
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
        local = cloud("local").os_images[os_name]  # a file on this machine, named by a setting
        assert isinstance(local, LocalImage) and local.setting in SETTINGS and local.source.startswith("https://")
    # the lock pins the published images; a file on this machine has nothing to pin
    assert set(image_refs("debian-12")) == set(CLOUD_NAMES) - {"local"}


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
    from provisioner.hooks import HOOKS
    from provisioner.hooks.providers import ProviderRegistry

    assert ProviderRegistry().clouds == provisionable_clouds()
    assert tuple(n for n, h in HOOKS.items() if h.provider is not None) == provisionable_clouds()


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


def test_gce_machine_families_live_in_the_gcp_package() -> None:
    from provisioner.providers.gcp import families as G

    for name in ("GCE_FAMILIES", "GceFamily", "gce_family", "gce_disk_type", "GCE_LOCAL_SSD_GIB", "gce_local_ssd_gib",
                 "LOCAL_SSD_DISK_GIB", "N1_GPU_LIMITS", "n1_gpu_limits"):
        assert hasattr(G, name) and not hasattr(F, name), name


def test_azure_and_aws_machine_tables_live_in_their_packages() -> None:
    """Issue 26: a cloud's machine tables are in its own package; catalog/families.py keeps only what every cloud
    shares (GPU names and memory)."""
    from provisioner.providers.aws import families as A
    from provisioner.providers.azure import families as Z

    for name in ("AzureSeries", "AZURE_SERIES", "azure_series", "AZURE_FRACTIONAL", "AZURE_GPU_COUNT_FIXES",
                 "AZURE_RETIRED", "azure_retirement", "AZURE_LOCAL_NVME_GIB", "azure_disk_types", "family"):
        assert hasattr(Z, name) and not hasattr(F, name), name
    for name in ("AWS_LOCAL_NVME_GIB", "family"):
        assert hasattr(A, name) and not hasattr(F, name), name


def test_family_of_asks_the_cloud_s_spec() -> None:
    """The catalog's ``family`` of a shape comes from the cloud's ``family_of`` hook (provisioner/hooks/); a cloud
    without one (a fourth cloud that has no families) uses the instance type itself."""
    import dataclasses

    from provisioner import hooks

    assert F.family_of("gcp", "a2-highgpu-1g") == "a2-highgpu"
    assert F.family_of("gcp", "n1-standard-8") == "n1"
    assert F.family_of("azure", "Standard_NC24ads_A100_v4") == "NC_A100_v4"
    assert F.family_of("azure", "Standard_Unknown_v9") == "Standard_Unknown_v9"
    assert F.family_of("aws", "p4d.24xlarge") == "p4d"
    assert all(h.family_of for h in hooks.HOOKS.values())
    fourth = dataclasses.replace(hooks.of("aws"), family_of=None)
    real = hooks.HOOKS
    try:
        hooks.HOOKS = {**real, "aws": fourth}  # type: ignore[misc]
        assert F.family_of("aws", "p4d.24xlarge") == "p4d.24xlarge"
    finally:
        hooks.HOOKS = real  # type: ignore[misc]


def test_ready_time_estimates_are_cloud_spec_fields() -> None:
    """The expected time to ready (estimates from public reports) is ``CloudSpec.ready_estimate``; a cloud without
    a published figure has None (shown as unknown, never guessed)."""
    from provisioner.bake import ready_time

    assert not hasattr(ready_time, "ESTIMATES")
    gcp, azure = cloud("gcp").ready_estimate, cloud("azure").ready_estimate
    assert gcp is not None and (gcp.cold_s, gcp.baked_s) == (215, 75) and "issue #28" in gcp.source
    assert azure is not None and (azure.cold_s, azure.baked_s) == (1260, 170)
    assert cloud("aws").ready_estimate is None
    boot = {c: ready_time.terms(_t4(), c, baked=True)[0] for c in ("aws", "gcp")}
    assert boot["aws"].seconds is None and boot["gcp"].seconds == 75  # the boot term: the cloud's published figure


def test_per_cloud_catalog_hooks_resolve_without_a_cloud_sdk() -> None:
    """The hooks ``plan`` and ``validate`` call (families, disks per family, local SSD facts, catalog checks, the
    identity check) import their cloud's pure modules, no SDK: each is called here on a catalog row of its cloud."""
    code = ("import sys\n"
            "from provisioner.catalog.storage import load_catalog\n"
            "from provisioner.hooks import HOOKS\n"
            "ident = '/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ops/providers/'\n"
            "ident += 'Microsoft.ManagedIdentity/userAssignedIdentities/trainvm-vms'\n"
            "offers = load_catalog().offers\n"
            "called = 0\n"
            "for c, h in HOOKS.items():\n"
            "    o = next((o for o in offers if o.cloud == c), None) or h.host_offers()[0]  # local: this machine\n"
            "    for hook, arg in ((h.family_of, o.instance_type), (h.family_disk_map, o.family), (h.catalog_check, o),\n"
            "                      (h.identity_check, ident)):\n"
            "        if hook is not None:\n"
            "            hook(arg)\n"
            "            called += 1\n"
            "    if h.local_ssd is not None:\n"
            "        h.local_ssd()\n"
            "        called += 1\n"
            "print(called, sorted(m for m in sys.modules if m.split('.')[0] in ('google', 'azure', 'boto3', 'botocore')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # GCE: family, disks per family, local SSD, catalog check; Azure: family, catalog check, identity; AWS: family;
    # local: family (its offer is this machine's, from its host_offers hook)
    assert out.strip() == "9 []"


def test_secret_reference_forms_come_from_the_registry() -> None:
    from provisioner.profile import fields

    source = (ROOT / "provisioner" / "profile" / "fields.py").read_text()
    for spec in CLOUDS.values():
        if not spec.secret_refs:  # only a rehearsal cloud (this machine) has no secret store: a profile that
            assert spec.rehearsal and not spec.secret_kinds, spec.name  # names one is not planned there
            continue
        for form in spec.secret_refs:
            kind = form.pattern.split("/", 1)[0]
            assert kind in spec.secret_kinds and form.hint.startswith(f"secret://{kind}/"), (spec.name, form)
            assert f"{kind}/" not in source, kind  # profile/fields.py spells no store
            assert form.pattern in fields.SECRET_REF_RE.pattern and form.hint in fields.SECRET_HINT
    assert fields.SECRET_REF_RE.match("secret://gcp/hf-token")
    assert fields.SECRET_REF_RE.match("secret://azure-keyvault/my-vault/hf-token")
    assert fields.SECRET_REF_RE.match("secret://aws/arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-AbCdEf")
    assert not fields.SECRET_REF_RE.match("secret://vault/hf-token")


def test_importing_the_registry_imports_no_cloud_sdk() -> None:
    code = ("import sys, provisioner.providers.registry, provisioner.providers.lifecycle; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('google', 'azure', 'boto3', 'botocore')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# Quoted cloud names outside providers/ (the registry's table is the one place): the render package's docstring example
# and the JSON-schema example of placement.identity (a mapping keyed by cloud; its check is the registry's
# identity_check hook) are the only ones left. The catalog's per-cloud checks are the ``catalog_check`` hook, a
# shape's family the ``family_of`` hook (provisioner/hooks/), the expected time to ready ``CloudSpec.ready_estimate``.
ALLOWED: dict[str, int] = {}
#: a cloud's own hooks (issue 37: above its package, provisioner/hooks/NAME.py) name it once, as its package does; the
#: rest of provisioner/hooks/ (the table, the provider registry) is counted like any other module
CLOUD_HOOK_MODULES = frozenset(f"provisioner/hooks/{c}.py" for c in CLOUD_NAMES)


def test_no_new_cloud_name_branches_outside_providers() -> None:
    found: dict[str, int] = {}
    rx = re.compile(r"""["'](gcp|azure|aws)["']""")
    for path in sorted((ROOT / "provisioner").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("provisioner/providers/") or rel in CLOUD_HOOK_MODULES:
            continue
        n = len(rx.findall(path.read_text()))
        if n:
            found[rel] = n
    assert found == ALLOWED


def test_cli_help_spells_no_cloud_and_names_the_registry_clouds() -> None:
    """The options' help is built from providers/names.py (which the registry must agree with): no module of the
    cli/ package spells a cloud in a help string, and ``--help`` lists the registry's clouds."""
    from typer.testing import CliRunner

    from provisioner.cli import app
    from provisioner.providers import names
    from provisioner.providers.registry import or_list

    assert names.CLOUD_NAMES == CLOUD_NAMES and names.PROVISIONABLE == provisionable_clouds()
    text = "\n".join(p.read_text() for p in sorted((ROOT / "provisioner" / "cli").glob("*.py")))
    assert "def plan(" in text and "def status(" in text  # the commands' modules are the ones read
    assert not re.findall(r"""help=f?"[^"]*\b(?:gcp|azure|aws)\b""", text)
    every, provisionable = ", ".join(CLOUD_NAMES), ", ".join(provisionable_clouds())
    for args, expected in ((["plan", "--help"], f"Only these clouds (repeatable): {every}."),
                           (["catalog", "show", "--help"], f"{or_list(CLOUD_NAMES)}."),
                           (["render", "--help"], f"{or_list(CLOUD_NAMES)}."),
                           (["status", "--help"], f"Only this cloud ({provisionable})"),
                           (["list", "--help"], f"Only list the VMs on this cloud ({provisionable})."),
                           (["stop", "--help"], f"Only look on this cloud ({provisionable}).")):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert expected in " ".join(result.output.split()), (args, expected)


def test_help_does_not_import_the_registry() -> None:
    code = "import sys, provisioner.cli; print('provisioner.providers.registry' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _t4():  # noqa: ANN202
    from provisioner.profile import load_profile
    from tests.helpers import REPO

    return load_profile(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
