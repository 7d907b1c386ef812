"""Issue 10: a VM must be able to read its data. Each data scheme x each cloud -> feasible, or infeasible
with the reason `plan` gives (rejection counts, near misses); egress is estimated for sized sources."""

from __future__ import annotations

import pytest

from provisioner.providers.access import data_locality_exclusions, egress_basis, egress_estimate, egress_prices
from provisioner.providers.registry import NATIVE_SCHEMES
from tests.helpers import EXAMPLES

SOURCES = {"gs": "gs://bucket/corpus/", "s3": "s3://bucket/corpus/", "az": "az://account1/container/corpus/",
           "https": "https://example.com/corpus.tar"}
# scheme -> the clouds a VM reads it on without a credential
MATRIX = {"gs": {"gcp"}, "s3": {"aws"}, "az": {"azure"}, "https": {"gcp", "aws", "azure"}}
CLOUDS = ("gcp", "azure", "aws")
# the secret store each cloud's VM reads with its own identity (providers/registry.py secret_kinds)
OWN_STORE = {"gcp": "secret://gcp/reader", "azure": "secret://azure-keyvault/vault1/reader", "aws": "secret://aws/reader"}


@pytest.mark.parametrize("scheme", sorted(SOURCES))
@pytest.mark.parametrize("cloud", CLOUDS)
def test_matrix_scheme_x_cloud(scheme: str, cloud: str) -> None:
    excluded = data_locality_exclusions([(SOURCES[scheme], None)], (cloud,))
    if cloud in MATRIX[scheme]:
        assert excluded == {}
    else:
        assert set(excluded) == {cloud}
        assert f"read natively only on {', '.join(sorted(MATRIX[scheme]))}" in excluded[cloud]
        assert "data[].credential" in excluded[cloud]
    # a credential in the cloud's own secret store reads from anywhere; one in another cloud's store does not
    own = OWN_STORE[cloud]
    assert data_locality_exclusions([(SOURCES[scheme], own)], (cloud,)) == {}
    for other in set(OWN_STORE.values()) - {own}:
        excluded = data_locality_exclusions([(SOURCES[scheme], other)], (cloud,))
        if cloud in MATRIX[scheme]:
            assert excluded == {}  # read natively: the credential is not even needed
        else:
            assert f"its data[].credential {other} is in a secret store that a VM on {cloud} cannot read" in excluded[cloud]


def test_registry_is_the_one_table() -> None:
    # local (this machine) reads no cloud store natively
    assert {c: set(s) for c, s in NATIVE_SCHEMES.items()} == {"gcp": {"gs"}, "aws": {"s3"}, "azure": {"az"}, "local": set()}


@pytest.mark.parametrize("scheme", sorted(SOURCES))
@pytest.mark.parametrize("cloud", ("gcp", "azure"))
def test_plan_matrix_through_the_cli(cli, write_yaml, scheme: str, cloud: str) -> None:
    p = write_yaml(f"name: d\nextends: base/torch-2.4-cu124\nhardware: {{gpu: T4}}\nplacement: {{clouds: [{cloud}]}}\n"
                   f"data: [{{source: '{SOURCES[scheme]}', dest: /mnt/data/x}}]\n")
    r = cli("plan", str(p), "--json")
    doc = r.json()
    if cloud in MATRIX[scheme]:
        assert r.code == 0 and doc["chosen"]["cloud"] == cloud
    else:
        assert r.code == 1 and doc["chosen"] is None
        assert doc["rejected"][cloud] == {"data_locality": sum(doc["rejected"][cloud].values())}
        assert cloud in doc["request"]["data_excluded_clouds"]
        text = cli("plan", str(p), "--explain")
        assert text.code == 1 and "data_locality" in text.out  # the answer "no feasible offer", on stdout


def test_credential_makes_a_cross_cloud_source_feasible(cli, write_yaml) -> None:
    p = write_yaml("name: d\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\nplacement: {clouds: [azure]}\n"
                   "data: [{source: 'gs://bucket1/x/', dest: /mnt/data/x, credential: 'secret://azure-keyvault/vault1/reader', size_gib: 100}]\n")
    doc = cli("plan", str(p), "--json").json()
    assert doc["chosen"]["cloud"] == "azure"
    [e] = doc["estimate"]["egress"]
    assert (e["from"], e["to"], e["usd_per_gb"]) == ("gcp", "azure", 0.12)
    assert e["cost"] == round(100 * 1.073741824 * 0.12, 2) == doc["estimate"]["egress_cost"]
    assert e["price_source"].startswith("https://cloud.google.com/")
    assert "data egress: gs://bucket1/x/ (100 GiB) from gcp to azure: about $12.88 once" in cli("plan", str(p)).out
    bad = write_yaml("name: d\nextends: base/torch-2.4-cu124\ndata: [{source: 'gs://bucket1/x/', dest: /mnt/x, credential: 'hunter2'}]\n",
                     name="bad.yaml")
    r = cli("validate", str(bad))
    assert r.code == 1 and "data[0].credential" in r.err and "not a secret reference" in r.err


def test_egress_prices_are_sourced() -> None:
    """Every figure names its source and date; a figure not read from an official source names the official
    API it was not checked against, and says so in its evidence."""
    prices = egress_prices()
    assert set(prices) == {"gcp", "aws", "azure"}
    for cloud, p in prices.items():
        assert p["source"].startswith("https://") and 0 < p["usd_per_gb"] < 1, cloud
        assert isinstance(p["checked"], bool) and p["evidence"] and p["api"] and p["as_of"], cloud
        if not p["checked"]:
            assert "not fetched here" in p["api"] and "Not read from" in p["evidence"], cloud
    # only GCS's figure was read from the provider's own page (egress.yaml evidence); AWS and Azure were not
    assert {c: p["checked"] for c, p in prices.items()} == {"gcp": True, "aws": False, "azure": False}
    assert egress_estimate([("gs://bucket1/x", 10.0)], "gcp") == []  # same cloud: no egress
    assert egress_estimate([("gs://bucket1/x", None)], "azure") == []  # no size: no estimate
    assert egress_estimate([("https://x/y", 10.0)], "azure") == []  # unknown source cloud


# scheme -> the cloud that bills the egress of a copy to another cloud
BILLED_BY = {"gs": "gcp", "s3": "aws", "az": "azure"}


@pytest.mark.parametrize("scheme", sorted(SOURCES))
@pytest.mark.parametrize("cloud", CLOUDS)
def test_egress_estimate_scheme_x_cloud(scheme: str, cloud: str) -> None:
    """The estimate for 100 GiB uses the source cloud's figure from egress.yaml, for every scheme x cloud."""
    prices = egress_prices()
    got = egress_estimate([(SOURCES[scheme], 100.0)], cloud)
    if scheme not in BILLED_BY or BILLED_BY[scheme] == cloud:
        assert got == []  # https:// (no known source cloud) or same cloud
        return
    [e] = got
    price = prices[BILLED_BY[scheme]]
    assert (e["from"], e["to"], e["usd_per_gb"]) == (BILLED_BY[scheme], cloud, price["usd_per_gb"])
    assert e["cost"] == round(100 * 1.073741824 * price["usd_per_gb"], 2)
    assert e["checked"] is price["checked"] and e["price_as_of"] == price["as_of"]
    assert e["not_checked_against"] == (None if price["checked"] else price["api"])
    basis = egress_basis(e)
    if price["checked"]:
        assert basis.startswith(f"${price['usd_per_gb']}/GB list price, {price['source']}")
    else:
        assert basis.startswith(f"estimate: ${price['usd_per_gb']}/GB, not checked against")


@pytest.mark.parametrize(("scheme", "cloud", "checked"), [("s3", "gcp", False), ("az", "gcp", False), ("gs", "aws", True)])
def test_plan_says_estimate_for_a_price_not_checked(cli, write_yaml, scheme: str, cloud: str, checked: bool) -> None:
    p = write_yaml(f"name: d\nextends: base/torch-2.4-cu124\nhardware: {{gpu: T4}}\nplacement: {{clouds: [{cloud}]}}\n"
                   f"data: [{{source: '{SOURCES[scheme]}', dest: /mnt/data/x, credential: '{OWN_STORE[cloud]}', size_gib: 50}}]\n")
    doc = cli("plan", str(p), "--json").json()
    assert doc["chosen"]["cloud"] == cloud
    assert doc["estimate"]["egress_cost_checked"] is checked
    [line] = [ln for ln in cli("plan", str(p)).out.splitlines() if ln.startswith("data egress:")]
    assert ("(estimate: $" in line) is not checked
    assert ("list price" in line) is checked


def test_bert_pretrain_example_does_not_plan_azure_for_a_gs_corpus(cli) -> None:
    [path] = [p for p in EXAMPLES if p.stem == "bert-pretrain-8xa100"]
    doc = cli("plan", str(path), "--json").json()
    assert doc["chosen"]["cloud"] == "gcp"
    assert all(o["cloud"] != "azure" for o in [*doc["alternatives"], *doc["failover"]])
    assert doc["rejected"]["azure"] == {"data_locality": 185}


def test_credential_in_another_clouds_store_keeps_the_cloud_out(cli, write_yaml) -> None:
    """A gs:// source with a Secret Manager credential: an Azure VM cannot read Secret Manager with its own
    identity, so Azure stays infeasible, with the reason in the near misses."""
    p = write_yaml("name: d\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\nplacement: {clouds: [azure]}\n"
                   "data: [{source: 'gs://bucket1/x/', dest: /mnt/data/x, credential: 'secret://gcp/reader'}]\n")
    r = cli("plan", str(p), "--json")
    doc = r.json()
    assert r.code == 1 and doc["chosen"] is None
    assert "secret://gcp/reader is in a secret store that a VM on azure cannot read" in doc["request"]["data_excluded_clouds"]["azure"]


def test_credential_on_an_https_source_is_refused(cli, write_yaml) -> None:
    p = write_yaml("name: d\nextends: base/torch-2.4-cu124\nhardware: {gpu: T4}\n"
                   "data: [{source: 'https://example.com/x.tar', dest: /mnt/data/x, credential: 'secret://gcp/k'}]\n")
    r = cli("validate", str(p))
    assert r.code == 1 and "data[0].credential: an https:// source is read without a credential" in r.err


@pytest.mark.parametrize(("cloud", "region", "covered"), [
    ("aws", "us-east-1", True), ("aws", "eu-west-1", True), ("aws", "ap-southeast-2", False),
    ("azure", "eastus", True), ("azure", "japaneast", False), ("azure", "australiaeast", False),
])
def test_gcs_price_is_checked_only_for_the_destinations_it_covers(cloud: str, region: str, covered: bool) -> None:
    """GCS prices egress by destination; its checked figure covers the Americas and EMEA: a VM elsewhere gets
    the same figure called an estimate, with the region named."""
    [e] = egress_estimate([("gs://bucket1/x/", 10.0)], cloud, region)
    assert e["checked"] is covered and e["usd_per_gb"] == egress_prices()["gcp"]["usd_per_gb"]
    basis = egress_basis(e)
    if covered:
        assert "list price" in basis and e["destination_not_covered"] is None
    else:
        assert e["destination_not_covered"] == region
        assert basis.startswith(f"estimate: $0.12/GB, gcp's price was checked for destinations in the Americas and EMEA, not for {region}")
