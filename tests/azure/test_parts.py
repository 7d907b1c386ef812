"""Issue 37, one style per cloud: ``AzureProvider`` composes its parts (API client, create transaction, group lease,
images) instead of mixing in classes that reach back into it through ``self``; each part is typed, so a wrong
collaborator, a misspelled field of an ARM answer or a wrong argument to ``preflight`` is a mypy error (before: the
mixins declared their collaborators as ``def _call(self, *args: Any, **kwargs: Any) -> Any`` and ``preflight`` took
``profile: Any``)."""

from __future__ import annotations

import tomllib

from provisioner.providers.azure.provider import AzureProvider
from provisioner.providers.capabilities import ClusterReader, ImagePinner, Preflighter
from tests.helpers import REPO, mypy_typo_lines

PARTS = ["provisioner.providers.azure.compute", "provisioner.providers.azure.create", "provisioner.providers.azure.group",
         "provisioner.providers.azure.identity", "provisioner.providers.azure.images", "provisioner.providers.azure.lease",
         "provisioner.providers.azure.power",
         "provisioner.providers.azure.preflight", "provisioner.providers.azure.provider",
         "provisioner.providers.azure.records", "provisioner.providers.azure.roles"]


def test_the_provider_inherits_no_behaviour_of_its_own_cloud() -> None:
    """Its only bases are the shared capability interfaces (Protocols; ImagePinner and ClusterReader are the shared
    layer's, converted on their own): no Azure class among them."""
    assert set(AzureProvider.__bases__) == {ImagePinner, Preflighter, ClusterReader}
    assert not [c for c in AzureProvider.__mro__ if c.__module__.startswith("provisioner.providers.azure.")
                and c is not AzureProvider]


def test_the_parts_are_checked_without_explicit_any() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    strict_any = {m for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_any_explicit") for m in o["module"]}
    assert set(PARTS) <= strict_any


SNIPPET = '''\
from provisioner.profile import LoadedProfile
from provisioner.providers.azure.api import AzureApi, props, wire
from provisioner.providers.azure.create import CreateTransaction
from provisioner.providers.azure.lease import GroupLease
from provisioner.providers.azure.power import vm_state
from provisioner.providers.azure.provider import AzureProvider
from provisioner.providers.base import LaunchSpec


def preflight(provider: AzureProvider, loaded: LoadedProfile) -> None:
    print(provider.preflight(loaded.profile, "vm", ["eastus"])["status"])
    print(provider.preflight(loaded, "vm", ["eastus"]))  # typo
    print(provider.preflight(loaded.profile, "vm", ["eastus"])["stauts"])  # typo


def parts(provider: AzureProvider, api: AzureApi, spec: LaunchSpec) -> None:
    print(GroupLease(api).cleanup("rg", spec, None, "attempt"), provider.lease.drop_vm_group("rg", "vm"))
    print(GroupLease(provider))  # typo
    print(CreateTransaction(api, provider.lease, provider.images).run(spec, "eastus", "key"))  # typo
    print(provider.lease.cleanup("rg", "vm"))  # typo


def answers(api: AzureApi) -> None:
    vm = api.get_vm("rg", "vm") or {}
    print(vm_state(props(vm)), (vm.get("tags") or {}).get("trainvm-hash"), props(vm).get("provisioningState"))
    print(props(vm)["provisioningStat"])  # typo
    print(vm.get("location", "").upper(), vm["locaton"])  # typo
    print(vm_state(vm))  # typo
    print(wire(None)["properties"]["hardwareProfile"]["vmSize"].upper())
    print(wire(None)["properties"]["hardwareProfile"]["vmsize"])  # typo
'''


def test_a_wrong_collaborator_or_a_misspelled_arm_field_is_a_mypy_error(tmp_path) -> None:
    errors, typos, out = mypy_typo_lines(SNIPPET, tmp_path)
    assert errors == typos, out
