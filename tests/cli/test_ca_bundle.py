"""A CA-bundle variable that names a missing file (e.g. a stale demo environment after `make demo` stopped) is an
input error, exit 2, naming the variable, before any cloud call; it used to surface from the SDKs as an OSError,
reported as an internal error (exit 70)."""

from __future__ import annotations

import pytest

from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


@pytest.mark.parametrize("var", ["REQUESTS_CA_BUNDLE", "AWS_CA_BUNDLE", "SSL_CERT_FILE"])
def test_a_missing_ca_bundle_is_exit_2_naming_it(cli, clouds, monkeypatch, tmp_path, var) -> None:
    missing = tmp_path / "gone" / "ca.pem"
    monkeypatch.setenv(var, str(missing))
    for argv in (("list",), ("up", T4, "--yes")):
        r = cli(*argv, "--json")
        assert r.code == 2, r.out + r.err
        err = r.json()["error"]
        assert f"{var}={missing}: no such file" in err["message"] and "internal error" not in r.err
    assert not any(fake.vms for fake in clouds.values())  # nothing created


def test_an_existing_ca_bundle_is_used_as_is(cli, clouds, monkeypatch, tmp_path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    assert cli("list").code == 0
