"""Issue 37: no explicit ``Any`` in the Azure provider package. ``Any`` stays only where an SDK returns untyped data,
behind a typed adapter: the management clients are the Protocols of azure/sdk.py (``clients.make_clients`` casts the
SDK's classes to them), ARM answers ``arm.Arm`` (``api.wire``), the storage answers ``store.StorageDoc``, the Retail
Prices pages ``prices.PricePage``; the request bodies are TypedDicts (azure/bodies.py) or ``dict[str, object]``.
Every module is under ``disallow_any_explicit`` (pyproject.toml), and a misspelled field or operation is a mypy error.
"""

from __future__ import annotations

import io
import tokenize
import tomllib

from tests.helpers import REPO, mypy_typo_lines

PACKAGE = REPO / "provisioner" / "providers" / "azure"


def _modules() -> set[str]:
    return {"provisioner.providers.azure" + ("" if p.stem == "__init__" else f".{p.stem}") for p in PACKAGE.glob("*.py")}


def test_every_azure_module_is_checked_without_explicit_any() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    strict_any = {m for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_any_explicit") for m in o["module"]}
    assert _modules() - strict_any == set()


def test_no_azure_module_names_any() -> None:
    """Not even behind an alias (mypy does not flag a module that uses another module's alias of ``Any``)."""
    named = [f"{p.name}:{tok.start[0]}" for p in sorted(PACKAGE.glob("*.py"))
             for tok in tokenize.generate_tokens(io.StringIO(p.read_text()).readline)
             if tok.type == tokenize.NAME and tok.string == "Any"]
    assert named == []


SNIPPET = '''\
from provisioner.providers.azure import prices
from provisioner.providers.azure import request as R
from provisioner.providers.azure.api import AzureApi
from provisioner.providers.azure.group_request import scale_set_body
from provisioner.providers.azure.store import BlobPayloadStore
from provisioner.providers.base import LaunchSpec
from provisioner.providers.offer import Offer


def bodies(spec: LaunchSpec, offer: Offer) -> None:
    body = R.vm_body(spec, offer, subscription_id="s", image=R.image_for("debian-12", offer), ssh_public_key="k")
    print(body["properties"]["storageProfile"]["osDisk"], body["tags"]["trainvm-managed"])
    print(body["properties"]["storagProfile"])  # typo
    print(body["properties"]["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]["ipConfiguration"])  # typo
    ss = scale_set_body(spec, offer, subscription_id="s", image=R.image_for("debian-12", offer), ssh_public_key="k",
                        placement_group=None)
    print(ss["tags"], ss["sku"])
    print(ss["skus"])  # typo
    print(R.group_body(spec, "eastus")["tags"]["trainvm-managed"], R.group_body(spec, "eastus")["tag"])  # typo
    print(R.lifecycle_role(spec), R.lifecycle_role(offer))  # typo
    print(R.image_for("debian-12", "Standard_NC4as_T4_v3"))  # typo


def retail_prices(rows: list[prices.PriceItem]) -> None:
    print([r["retailPrice"] * 2 for r in rows], [r.get("armSkuName", "").startswith("Standard_") for r in rows])
    print([r["retailPrize"] for r in rows])  # typo
    print([r["armSkuName"] + 1 for r in rows])  # typo


def clients(api: AzureApi) -> None:
    compute, resource = api.clients().compute, api.clients().resource
    print(compute.virtual_machines.get("rg", "vm", expand="instanceView"), resource.resource_groups.get("rg"))
    print(compute.virtual_machine.get("rg", "vm"))  # typo
    print(compute.virtual_machines.get("rg"))  # typo
    print(compute.virtual_machines.begin_start("rg", "vm").result(timeout=1.0), compute.usage.list("eastus"))
    print([u.name.value.lower() for u in compute.usage.list("eastus")])  # typo
    print(resource.resources.get_by_id("/id"))  # typo
    print(api.storage().storage_accounts.list_keys("rg", "acct"), api.authorization().role_assignments.delete("s", "n"))
    print(api.storage().storage_account.list_keys("rg", "acct"))  # typo


def store(s: BlobPayloadStore) -> None:
    print(s.storage().blob_containers.create("rg", "acct", "trainvm", {}))
    print(s.storage().blob_containers.create("rg", "acct", {}))  # typo
'''


def test_a_misspelled_field_or_operation_on_the_typed_azure_documents_is_a_mypy_error(tmp_path) -> None:
    errors, typos, out = mypy_typo_lines(SNIPPET, tmp_path)
    assert errors == typos, out
