"""Issue 37: no explicit ``Any`` in ``GcpProvider``'s public methods, nor anywhere in the GCE package. What they return is the SDK's typed record
(``compute_v1.Instance``, ``compute_v1.Operation``: google-cloud-compute ships ``py.typed``) or a JSON document as
``dict[str, object]``, so a misspelled field of what the provider hands back is a mypy error, not an ``AttributeError``
on a real cloud. Every module of the package is checked with ``disallow_any_explicit`` and the strict flags; the REST bodies, the
compute_v1 messages, the storage SDK's objects and the price API's SKUs it reads are typed, so a misspelled field of
one is a mypy error too."""

from __future__ import annotations

import fnmatch
import tomllib

from tests.helpers import REPO, mypy_typo_lines

SNIPPET = '''\
from provisioner.providers.base import LaunchSpec
from provisioner.providers.gcp.provider import GcpProvider
from provisioner.providers.offer import Offer


def caller(provider: GcpProvider, spec: LaunchSpec, offer: Offer) -> None:
    op = provider.submit(spec, offer)
    print(op.status if op is not None else None, provider.instance(spec, offer, "img").labels)
    print(op.statsu if op is not None else None)  # typo
    print(provider.instance(spec, offer, "img").lables)  # typo
    report, profile = provider.read_report("vm")
    print(profile.get("name") if profile else None)
    print(profile["name"].upper() if profile else None)  # typo
    GcpProvider(credentials="not credentials")  # typo
'''

#: the REST documents, compute_v1 messages, storage objects and price SKUs the rest of the GCE package reads (issue 37:
#: no explicit ``Any`` in the package: gcp/rest_types.py, gcp/sdk_types.py, gcp/storage_types.py, gcp/prices.py)
PACKAGE_SNIPPET = '''\
from provisioner.providers.base import LaunchSpec
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.bake import GceBaker
from provisioner.providers.gcp.cluster import GceClusters
from provisioner.providers.gcp.cluster_request import node_body
from provisioner.providers.gcp.firewall import SshFirewall
from provisioner.providers.gcp.group import bulk_body, instance_properties
from provisioner.providers.gcp.prices import skus, unit_price
from provisioner.providers.gcp.request import firewall_bodies, instance_body
from provisioner.providers.gcp.store import GcsPayloadStore
from provisioner.providers.offer import Offer


def bodies(spec: LaunchSpec, offer: Offer) -> None:
    body = instance_body(spec, offer, "img", "p")
    print(body["machineType"], body["scheduling"].get("provisioningModel"), body["metadata"]["items"][0]["key"])
    print(body["machineTyp"])  # typo
    print(body["scheduling"]["provisioningModle"])  # typo
    print(body["metadata"]["items"][0]["vaule"])  # typo
    print(node_body(spec, offer, "img", "p")["lables"])  # typo
    props = instance_properties(body, None)
    print(bulk_body(["a"], props)["minCount"], bulk_body(["a"], props)["mincount"])  # typo
    rule = firewall_bodies(spec, "p")[0]
    print(rule["sourceRanges"], rule["sourceRange"])  # typo
    print(rule["priority"] + 1, rule["name"] + 1)  # typo


def messages(gce: GceApi, fw: SshFirewall, clusters: GceClusters, baker: GceBaker) -> None:
    inst = gce.get("z", "vm")
    print(inst.status if inst else None, inst.statsu if inst else None)  # typo
    print(gce.find_any("vm")[0].name)  # None when there is none: # typo
    listing = gce.aggregated("x")
    print([i.lables for i in listing.instances])  # typo
    print(gce.call(lambda: 1, missing=None) + 1)  # typo
    print(gce.call(lambda: 1) + 1)
    rule = fw.rule("r")
    print(rule.get("description") if rule else None, rule["descripton"] if rule else None)  # typo
    print([n.network_interfaces[0].network_ip for n in clusters.nodes("c")])  # typo
    print(baker.provider.gce.project, baker.gce.projcet)  # typo


def data(store: GcsPayloadStore) -> None:
    bucket = store.client().bucket("b")
    blob = bucket.get_blob("k", retry=store.retry(), timeout=1.0)
    print(blob.md5_hash if blob else None, blob.md5 if blob else None)  # typo
    print(bucket.iam_configuration.public_access_prevention, bucket.lifecycle_rule)  # typo
    for sku in skus():
        print(unit_price(sku, "h"), sku.get("skuId"), sku["skuID"])  # typo
        print(sku["category"]["usageType"], sku["category"]["usagetype"])  # typo
'''

#: every module of the GCE package
GCP_MODULES = sorted(f"provisioner.providers.gcp.{p.stem}" for p in (REPO / "provisioner/providers/gcp").glob("*.py")
                     if p.stem != "__init__")
STRICT_FLAGS = ["disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls",
                "disallow_untyped_decorators", "disallow_any_generics", "disallow_subclassing_any", "warn_return_any",
                "no_implicit_reexport", "strict_equality", "extra_checks"]


def _covered(flag: str) -> list[str]:
    """The module patterns of the mypy overrides that set ``flag``."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return [m for o in config["tool"]["mypy"]["overrides"] if o.get(flag) for m in o["module"]]


def _uncovered(flag: str) -> list[str]:
    patterns = _covered(flag)
    return [m for m in GCP_MODULES if not any(fnmatch.fnmatchcase(m, p) for p in patterns)]


def test_every_gce_module_disallows_explicit_any() -> None:
    assert "provisioner.providers.gcp.provider" in GCP_MODULES
    assert _uncovered("disallow_any_explicit") == []


def test_every_gce_module_is_checked_with_the_strict_flags() -> None:
    assert {flag: _uncovered(flag) for flag in STRICT_FLAGS} == {flag: [] for flag in STRICT_FLAGS}


def test_a_misspelled_field_of_what_gcp_provider_returns_is_a_mypy_error(tmp_path) -> None:
    errors, typos, out = mypy_typo_lines(SNIPPET, tmp_path)
    assert errors == typos, out


def test_a_misspelled_field_of_a_gce_document_or_message_is_a_mypy_error(tmp_path) -> None:
    errors, typos, out = mypy_typo_lines(PACKAGE_SNIPPET, tmp_path)
    assert errors == typos, out
