"""A VM resolves the profile's secret:// references (stack.env values) with its own identity, so a reference
to a secret store the cloud's VM cannot read makes that cloud infeasible, as a data credential does
(providers/access.py): secret kind x cloud matrix, and what `plan` says (rejection reason secret_store, the
field and file:line in the near misses)."""

from __future__ import annotations

import pytest

from provisioner.providers.access import secret_store_exclusions
from provisioner.providers.registry import CLOUDS as SPECS

REFS = {"gcp": "secret://gcp/hf-token", "azure-keyvault": "secret://azure-keyvault/vault1/hf-token",
        "aws": "secret://aws/hf-token"}
# the store each cloud's VM reads with its own identity
READS = {"gcp": "gcp", "azure": "azure-keyvault", "aws": "aws"}


def test_registry_is_the_one_table() -> None:
    # local (this machine) has no secret store: a profile with a secret:// reference is not planned there
    assert {c: set(s.secret_kinds) for c, s in SPECS.items()} == {**{c: {k} for c, k in READS.items()}, "local": set()}


@pytest.mark.parametrize("kind", sorted(REFS))
@pytest.mark.parametrize("cloud", sorted(READS))
def test_matrix_secret_kind_x_cloud(kind: str, cloud: str) -> None:
    where = "stack.env.TOKEN (p.yaml:5)"
    excluded = secret_store_exclusions([(where, REFS[kind])], (cloud,))
    if READS[cloud] == kind:
        assert excluded == {}
    else:
        assert excluded == {cloud: f"{where}: {REFS[kind]} is in a secret store that a VM on {cloud} cannot read with "
                                   f"its own identity (a VM on {cloud} reads secret://{READS[cloud]}/...)"}


def _profile(write_yaml, clouds: str, env: str, data: str = "") -> str:
    return str(write_yaml(f"name: d\nextends: base/torch-2.4-cu124\nhardware: {{gpu: T4}}\nplacement: {{clouds: [{clouds}]}}\n"
                          f"stack:\n  env:\n    FOO: bar\n    TOKEN: '{env}'\n{data}"))


@pytest.mark.parametrize("kind", sorted(REFS))
@pytest.mark.parametrize("cloud", ("gcp", "azure", "aws"))
def test_plan_matrix_through_the_cli(cli, write_yaml, kind: str, cloud: str) -> None:
    path = _profile(write_yaml, cloud, REFS[kind])
    r = cli("plan", path, "--json")
    doc = r.json()
    if READS[cloud] == kind:
        assert r.code == 0 and doc["chosen"]["cloud"] == cloud
        assert doc["request"]["secret_excluded_clouds"] == {}
        return
    assert r.code == 1 and doc["chosen"] is None
    assert doc["rejected"][cloud] == {"secret_store": sum(doc["rejected"][cloud].values())}
    why = doc["request"]["secret_excluded_clouds"][cloud]
    assert why.startswith(f"stack.env.TOKEN ({path}:8): {REFS[kind]} is in a secret store that a VM on {cloud} cannot read")
    explained = cli("plan", path, "--explain")
    assert explained.code == 1 and "secret_store" in explained.out and f"stack.env.TOKEN ({path}:8)" in explained.out  # the answer, on stdout


def test_other_clouds_stay_out_of_the_plan_and_failover(cli, write_yaml) -> None:
    path = _profile(write_yaml, "gcp, azure, aws", REFS["gcp"])
    doc = cli("plan", path, "--json").json()
    assert doc["chosen"]["cloud"] == "gcp"
    assert all(o["cloud"] == "gcp" for o in [*doc["alternatives"], *doc["failover"]])
    assert set(doc["rejected"]["azure"]) == {"secret_store"} and set(doc["rejected"]["aws"]) == {"secret_store"}
    text = cli("plan", path).out
    assert "secret_store" in text


def test_a_data_credential_is_the_data_rule_only(cli, write_yaml) -> None:
    """data[].credential keeps its data_locality reason; the secret_store rule looks at the other references."""
    path = _profile(write_yaml, "azure", REFS["azure-keyvault"],
                    "data: [{source: 'gs://bucket1/x/', dest: /mnt/data/x, credential: 'secret://gcp/reader'}]\n")
    doc = cli("plan", path, "--json").json()
    assert doc["chosen"] is None and set(doc["rejected"]["azure"]) == {"data_locality"}
    assert doc["request"]["secret_excluded_clouds"] == {}


def test_render_for_review_warns(cli, write_yaml) -> None:
    path = _profile(write_yaml, "gcp, aws", REFS["gcp"])
    r = cli("render", path, "--cloud", "aws")
    assert r.code == 0, r.err
    assert "stack.env.TOKEN" in r.err and "rule aws out for this profile (script shown for review only)" in r.err
