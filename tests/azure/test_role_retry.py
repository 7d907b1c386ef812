"""``PrincipalNotFound`` on a role assignment (a fresh identity ARM has not replicated yet) is retried by the one
retry library (issue 26, ``providers/poll.py``), through azure-mgmt-authorization against the ARM emulator. Past
PRINCIPAL_WAIT_SECONDS the caller gets ARM's last answer as a ProviderError (never a library's RetryError, which
the CLI would report as an internal error, exit 70).

Not modelled by the emulator: replication that ends on its own while principalType is set (ARM documents it as
rare); a principal id the directory does not hold stands for one that never replicates."""

from __future__ import annotations

import pytest

from provisioner.providers.azure import roles as azure_roles
from provisioner.providers.azure.request import names
from provisioner.providers.base import ProviderError

GHOST = "22222222-2222-4222-8222-222222222222"


def role_puts(emu):
    return emu.calls("PUT", r"/providers/Microsoft\.Authorization/roleAssignments/[^/]+$")


def test_principal_never_replicated_is_arms_error_after_the_bound(emu, provider, t4_spec, t4, monkeypatch):
    spec = t4_spec.__class__(**{**t4_spec.__dict__, "idle_shutdown_minutes": 60})
    provider.create(spec, t4)
    before = len(role_puts(emu))
    monkeypatch.setattr(azure_roles, "PRINCIPAL_WAIT_SECONDS", 0.5)
    with pytest.raises(ProviderError) as err:
        azure_roles.grant_lifecycle_role(provider.client, spec, {"identity": {"principalId": GHOST}})
    assert err.value.code == "PrincipalNotFound" and "does not exist in the directory" in str(err.value)
    puts = role_puts(emu)[before:]
    assert len(puts) > 1 and {p.status for p in puts} == {400}
    assert names(spec.name).rg in emu.resource_groups()
