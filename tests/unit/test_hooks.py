"""Issue 37: the layers above reach a cloud through typed hooks (providers/hook_types.py; the table in
provisioner/hooks/), not "module:function" strings, and tests inject providers through the registry
(hooks/providers.py ``ProviderRegistry``), not module globals.

mypy checks each hook: a cloud module whose function no longer fits its hook (a parameter added, a return type
widened, a class that no longer implements the ``Baker`` protocol) is a mypy error at the hook, and so is a
hook of the wrong type in a ``CloudHooks``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from provisioner.errors import CloudError
from provisioner.hooks import HOOKS, bakers, check_identity, priced_clouds
from provisioner.hooks import providers as provider_registry
from provisioner.hooks.providers import ProviderRegistry, get_provider, provider_clouds
from provisioner.providers.registry import CLOUDS, provisionable_clouds
from tests.fakes import FakeProvider
from tests.helpers import REPO, mypy_typo_lines


def test_the_hooks_table_has_every_cloud_of_the_registry_in_its_order() -> None:
    assert tuple(HOOKS) == tuple(CLOUDS)
    assert all(h.name == n for n, h in HOOKS.items())
    # a provider hook exactly where the cloud's data says trainvm provisions there
    assert {n for n, h in HOOKS.items() if h.provider is not None} == {n for n, c in CLOUDS.items() if c.provisionable}
    assert bakers() == ("gcp", "azure", "aws", "local") and priced_clouds() == ("gcp", "azure", "aws")


def test_the_identity_check_is_the_cloud_s_hook() -> None:
    good = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ops/providers/"
            "Microsoft.ManagedIdentity/userAssignedIdentities/trainvm-vms")
    assert check_identity("azure", good) == good
    with pytest.raises(ValueError, match="a pre-made VM identity only on azure"):
        check_identity("gcp", "x")


def test_importing_the_hooks_imports_no_cloud_code() -> None:
    """The table is cheap: no cloud package module beyond the packages' empty ``__init__``, no SDK, not even the
    provider contract (``plan`` asks the pure hooks and must not import base.py)."""
    code = ("import sys, provisioner.hooks, provisioner.hooks.providers\n"
            "print(sorted(m for m in sys.modules if m.startswith(('provisioner.providers.gcp', 'provisioner.providers.azure',"
            " 'provisioner.providers.aws', 'provisioner.providers.base', 'google', 'azure', 'boto3', 'botocore'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "[]"


def test_a_registry_hands_back_the_providers_it_was_given_and_builds_the_others() -> None:
    fake = FakeProvider("gcp")
    built: list[str] = []

    def make() -> Any:
        built.append("azure")
        return FakeProvider("azure")

    registry = ProviderRegistry({"gcp": fake}, {"azure": make})
    assert registry.clouds == ("azure", "gcp")
    assert registry.get("gcp") is fake and registry.get("gcp") is fake
    assert registry.get("azure") is not registry.get("azure") and built == ["azure", "azure"]  # built on each ask
    with pytest.raises(CloudError, match="cannot provision on 'aws' yet"):
        registry.get("aws")
    # default: the real providers of the provisionable clouds (built only when asked: nothing asked here)
    assert ProviderRegistry().clouds == provisionable_clouds()
    assert ProviderRegistry({"gcp": fake}).clouds == provisionable_clouds()


def test_the_fixture_installs_a_registry_for_the_test_only(install_providers: Any) -> None:
    before = provider_registry.DEFAULT
    fake = FakeProvider("aws")
    registry = install_providers({"aws": fake})
    assert provider_registry.DEFAULT is registry is not before
    assert get_provider("aws") is fake and provider_clouds() == provisionable_clouds()


def test_after_the_fixture_the_real_registry_is_back() -> None:
    assert type(provider_registry.DEFAULT) is ProviderRegistry and not provider_registry.DEFAULT._given


SNIPPET = '''\
from provisioner.hooks import gcp, of
from provisioner.providers.hook_types import CloudHooks


def family(instance_type: str) -> str:
    return instance_type


def family_of_a_number(instance_type: int) -> str:
    return str(instance_type)


CloudHooks(name="gcp", request_preview=gcp.request_preview, family_of=family, baker=gcp.baker)
CloudHooks(name="gpc", request_preview=gcp.request_preview)  # typo
CloudHooks(name="gcp", request_preview=gcp.request_preview, family_of=family_of_a_number)  # typo
CloudHooks(name="gcp", request_preview=gcp.request_preview, price_source=gcp.family_of)  # typo
CloudHooks(name="gcp", request_preview=gcp.request_preview, baker=gcp.provider)  # typo
CloudHooks(name="gcp", request_preview=gcp.quota_reader)  # typo
hook = of("gcp").family_of
if hook is not None:
    print(hook("a2-highgpu-1g").upper())
    print(hook(1))  # typo
print(of("gcp").price_sauce)  # typo
'''


def test_a_hook_of_the_wrong_type_is_a_mypy_error(tmp_path: Path) -> None:
    errors, typos, out = mypy_typo_lines(SNIPPET, tmp_path)
    assert len(typos) == 7
    assert errors == typos, out


#: (cloud module, its text, the text it becomes, the line of provisioner/hooks/ that must then fail mypy)
MUTATIONS = (
    # a parameter added to GCE's family function
    ("provisioner/providers/gcp/families.py", "def gce_family(machine_type: str) -> str:",
     "def gce_family(machine_type: str, zone: str = '', *, strict: bool) -> str:",
     ("provisioner/hooks/gcp.py", "return gce_family(instance_type)")),
    # Azure's identity check may now answer None
    ("provisioner/providers/azure/identity.py", "def check_identity(value: str) -> str:",
     "def check_identity(value: str) -> str | None:",
     ("provisioner/hooks/azure.py", "return check_identity(value)")),
    # AWS's baker no longer implements the Baker protocol (a method renamed)
    ("provisioner/providers/aws/bake.py", "    def delete_image(self,", "    def delete_images(self,",
     ("provisioner/hooks/aws.py", "return AwsBaker(provider)")),
)


def test_a_cloud_module_that_no_longer_fits_its_hook_is_a_mypy_error(tmp_path: Path) -> None:
    from mypy import api

    args = ["--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), "--no-error-summary",
            "--show-error-codes"]
    expected = set()
    for i, (module, old, new, (hook_file, hook_line)) in enumerate(MUTATIONS):
        text = (REPO / module).read_text()
        assert text.count(old) == 1, (module, old)
        shadow = tmp_path / f"shadow{i}.py"
        shadow.write_text(text.replace(old, new))
        args += ["--shadow-file", str(REPO / module), str(shadow)]
        lines = (REPO / hook_file).read_text().splitlines()
        expected.add((hook_file, next(n for n, line in enumerate(lines, 1) if line.strip() == hook_line)))
    out, err, _ = api.run([*args, *(str(REPO / "provisioner" / "hooks" / f"{c}.py") for c in HOOKS)])
    assert not err, err
    found = set()
    for line in out.splitlines():
        if ": error:" in line:
            path, number = line.split(":")[:2]
            found.add((Path(path).resolve().relative_to(REPO).as_posix(), int(number)))
    assert found == expected, out
