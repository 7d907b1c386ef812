"""The Azure payload store (providers/azure/store.py): azure-mgmt-storage against the ARM emulator (storage account,
container, lifecycle policy, listKeys; bodies validated against schemas generated from azure-mgmt-storage's models)
and azure-storage-blob against Azurite (the real blob service's emulator, HTTPS, shared-key auth verified).

What the fakes do not model: RBAC (neither the emulator nor Azurite checks what a principal may do: a
Contributor-only user's refused Entra upload, or a VM identity without Storage Blob Data Reader, cannot be
reproduced; the emulator only records the role assignment and answers AuthorizationFailed when told to), role
propagation delay, token signatures, the lifecycle policy actually deleting blobs, storage-account names being
global across tenants (``taken_storage_names`` stands in), and ARM and the blob service being one system (a
container created through ARM is mirrored into Azurite by this module's hook)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
import re
from dataclasses import replace

import pytest

from provisioner.providers.azure.request import names, own_identity_id
from provisioner.providers.azure.store import (
    BLOB_DATA_READER,
    CONTAINER,
    STORE_TAG,
    BlobPayloadStore,
    account_name,
    container_scope,
    store_group,
)
from provisioner.providers.base import (
    AuthError,
    CapacityError,
    ConflictError,
    ProviderError,
    RegionUnavailableError,
    RetryExhaustedError,
)
from provisioner.providers.store import EXPIRE_DAYS, PAYLOAD_LABEL, REFRESH_DAYS, payload_key
from tests.azure.conftest import azurite_keys
from tests.emulators.arm import DEFAULT_SUBSCRIPTION as SUB
from tests.emulators.arm import ArmEmulator

KEYS = azurite_keys()
CONTAINER_PUT = re.compile(r"/storageAccounts/([^/]+)/blobServices/default/containers/([^/]+)$", re.I)


@pytest.fixture(scope="module")
def server(tls_ca):
    """The ARM emulator with the CA Azurite's certificate comes from (one REQUESTS_CA_BUNDLE for both)."""
    with ArmEmulator(ca=tls_ca) as emu:
        yield emu


@pytest.fixture
def store_env(emu, azurite, monkeypatch):
    """The emulator's accounts get the keys Azurite knows; a container PUT through ARM is created in Azurite too."""
    emu.state.storage_keys.update(KEYS)
    monkeypatch.setenv("TRAINVM_AZURE_BLOB_ENDPOINT", azurite.url)

    def mirror(method, path, body, status):
        m = CONTAINER_PUT.search(path)
        if method == "PUT" and m and status in (200, 201) and m.group(1) in KEYS:
            from azure.core.exceptions import ResourceExistsError

            try:
                azurite.service(m.group(1), emu.ca_path).create_container(m.group(2))
            except ResourceExistsError:
                pass
    emu.after_request = mirror
    return emu


@pytest.fixture
def store(store_env, provider):
    return BlobPayloadStore(provider.client)


def payload(n: int = 2048) -> tuple[bytes, str]:
    data = os.urandom(n)
    return data, hashlib.sha256(data).hexdigest()


def blob(azurite, emu, region, sha):
    return azurite.service(account_name(SUB, region), emu.ca_path).get_blob_client(CONTAINER, payload_key(sha))


def test_stage_creates_the_store_and_uploads_once(store, store_env, azurite):
    emu, (data, sha) = store_env, payload()
    ref = store.stage("eastus", data, sha)
    acct = account_name(SUB, "eastus")
    assert re.fullmatch(r"tv[0-9a-f]{22}", acct)
    assert (ref.cloud, ref.region, ref.store, ref.key, ref.sha256, ref.size, ref.uploaded) == (
        "azure", "eastus", f"{acct}/{CONTAINER}", f"payloads/{sha}.tar.gz", sha, len(data), True)
    assert ref.refreshed is False  # a new object
    assert ref.url == f"{azurite.url}/{acct}/{CONTAINER}/payloads/{sha}.tar.gz"
    b = blob(azurite, emu, "eastus", sha)
    assert b.download_blob().readall() == data
    etag = b.get_blob_properties().etag
    again = BlobPayloadStore(store.api).stage("eastus", data, sha)  # a new process: finds everything in place
    assert again.uploaded is False and again.url == ref.url
    assert b.get_blob_properties().etag == etag  # not written again
    assert len(emu.calls("PUT", rf"/storageAccounts/{acct}$")) == 1  # the second stage found the account


def test_account_container_and_policy_as_the_emulator_stored_them(store, store_env):
    emu, (data, sha) = store_env, payload()
    store.stage("westeurope", data, sha)
    from azure.mgmt.resource.resources import ResourceManagementClient
    from azure.mgmt.storage import StorageManagementClient

    kw = emu.client_kwargs()
    st, rc = StorageManagementClient(**kw), ResourceManagementClient(**kw)
    rg, acct = store_group("westeurope"), account_name(SUB, "westeurope")
    group = rc.resource_groups.get(rg)
    assert group.tags == {"trainvm-managed": "true", STORE_TAG: "true"} and group.location == "westeurope"
    a = st.storage_accounts.get_properties(rg, acct)
    assert (a.kind, a.sku.name, a.location) == ("StorageV2", "Standard_LRS", "westeurope")
    assert a.allow_blob_public_access is False and a.minimum_tls_version == "TLS1_2"
    assert a.enable_https_traffic_only is True and a.allow_shared_key_access is True
    assert a.tags == {"trainvm-managed": "true", STORE_TAG: "true"}
    c = st.blob_containers.get(rg, acct, CONTAINER)
    assert c.public_access in ("None", None)
    (rule,) = st.management_policies.get(rg, acct, "default").policy.rules
    assert rule.enabled and rule.definition.filters.prefix_match == [f"{CONTAINER}/payloads/"]
    assert rule.definition.filters.blob_types == ["blockBlob"]
    assert rule.definition.actions.base_blob.delete.days_after_modification_greater_than == EXPIRE_DAYS
    assert emu.api_versions()["Microsoft.Storage"]  # recorded: the SDK's own api-version


def test_old_or_other_size_objects_are_uploaded_again(store, store_env, azurite):
    emu, (data, sha) = store_env, payload()
    store.stage("eastus", data, sha)
    b = blob(azurite, emu, "eastus", sha)
    etag = b.get_blob_properties().etag
    later = BlobPayloadStore(store.api, now=lambda: dt.datetime.now(dt.UTC) + dt.timedelta(days=REFRESH_DAYS - 1))
    assert later.stage("eastus", data, sha).uploaded is False and b.get_blob_properties().etag == etag
    old = BlobPayloadStore(store.api, now=lambda: dt.datetime.now(dt.UTC) + dt.timedelta(days=REFRESH_DAYS, minutes=1))
    refreshed = old.stage("eastus", data, sha)
    assert refreshed.uploaded is True and refreshed.refreshed is True  # not a new object (issue 36 item 3)
    assert b.get_blob_properties().etag != etag
    b.upload_blob(data[:100], overwrite=True)  # a leftover of another size under that key
    assert store.stage("eastus", data, sha).uploaded is True
    assert b.download_blob().readall() == data


def test_release_and_stored(store, store_env, azurite):
    emu = store_env
    (d1, s1), (d2, s2) = payload(), payload(3000)
    store.stage("eastus", d1, s1)
    store.stage("eastus", d2, s2)
    assert {s1, s2} <= set(store.stored("eastus"))
    assert store.release("eastus", s1) is True
    assert not blob(azurite, emu, "eastus", s1).exists()
    assert store.release("eastus", s1) is False
    fresh = BlobPayloadStore(store.api)  # another process: release/stored find the store without creating anything
    assert s1 not in fresh.stored("eastus") and s2 in fresh.stored("eastus")
    assert fresh.release("eastus", s2) is True


def test_no_store_in_a_region_creates_nothing(store, store_env):
    emu = store_env
    assert store.stored("westus2") == [] and store.release("westus2", "0" * 64) is False
    assert [r for r in emu.requests if r.method != "GET"] == []


def test_stage_refuses_bytes_of_another_hash(store):
    data, sha = payload()
    with pytest.raises(ProviderError, match="sha256"):
        store.stage("eastus", data + b"x", sha)


def test_account_name_taken_by_someone_else(store, store_env):
    """issue 36 item 7: checkNameAvailability says AlreadyExists before anything is created: a per-region failure
    (RegionUnavailableError, which failover skips past), no resource group left."""
    emu, (data, sha) = store_env, payload()
    acct = account_name(SUB, "eastus")
    emu.state.taken_storage_names.add(acct)
    with pytest.raises(RegionUnavailableError, match=f"{acct}.*taken") as err:
        store.stage("eastus", data, sha)
    assert err.value.code == "StorageAccountAlreadyTaken" and "placement.regions" in (err.value.hint or "")
    assert len(emu.calls("POST", r"/providers/Microsoft\.Storage/checkNameAvailability$")) == 1
    assert [r.path for r in emu.requests if r.method in ("PUT", "DELETE")] == []
    assert store_group("eastus") not in emu.resource_groups()


def test_account_name_taken_after_the_check_removes_the_group(store, store_env):
    """Taken between the name check and the create (409 StorageAccountAlreadyTaken): the group this stage created
    for the account is deleted again, awaited and checked gone (cleanup verified)."""
    emu, (data, sha) = store_env, payload()
    acct = account_name(SUB, "eastus")

    def someone_else_first(method, path, body):
        if method == "PUT" and path.endswith(f"/storageAccounts/{acct}"):
            emu.state.taken_storage_names.add(acct)
    emu.before_request = someone_else_first
    with pytest.raises(RegionUnavailableError, match=f"{acct}.*taken") as err:
        store.stage("eastus", data, sha)
    assert err.value.code == "StorageAccountAlreadyTaken" and err.value.cleanup == "verified"
    assert len(emu.calls("PUT", rf"/resourcegroups/{store_group('eastus')}$")) == 1
    assert store_group("eastus") not in emu.resource_groups()


def test_a_store_group_left_without_its_account_is_removed_when_the_name_is_taken(store, store_env, provider):
    """An earlier trainvm created the group, then met the taken name (and kept the group): it is deleted now."""
    emu, (data, sha) = store_env, payload()
    provider.api().resource.resource_groups.create_or_update(store_group("eastus"), {"location": "eastus",
                                                                                     "tags": {STORE_TAG: "true"}})
    emu.state.taken_storage_names.add(account_name(SUB, "eastus"))
    with pytest.raises(RegionUnavailableError) as err:
        store.stage("eastus", data, sha)
    assert err.value.cleanup == "verified" and store_group("eastus") not in emu.resource_groups()


def test_up_fails_over_to_the_next_region_when_the_store_name_is_taken(store, store_env, provider, t4_spec, offers):
    """issue 36 item 7: `up` goes on to the next planned region instead of stopping with exit 1."""
    from provisioner.provision.failover import provision

    emu, (data, sha) = store_env, payload()
    emu.state.taken_storage_names.add(account_name(SUB, "eastus"))
    chain = [offers[("eastus", "Standard_NC4as_T4_v3")], offers[("eastus", "Standard_NC8as_T4_v3")],
             offers[("westus2", "Standard_NC4as_T4_v3")]]
    result = provision(chain, lambda o: with_payload(t4_spec, store.stage(o.region, data, sha)), lambda c: provider)
    assert [(a.region, a.outcome, a.error_code) for a in result.attempts] == [
        ("eastus", "error", "StorageAccountAlreadyTaken"), ("westus2", "created", None)]
    assert result.record.region == "westus2"
    assert store_group("eastus") not in emu.resource_groups()


def test_a_foreign_group_of_that_name_is_refused(store, store_env, provider):
    emu, (data, sha) = store_env, payload()
    provider.api().resource.resource_groups.create_or_update(store_group("eastus"), {"location": "eastus"})
    with pytest.raises(ConflictError, match="not trainvm's payload store"):
        store.stage("eastus", data, sha)
    assert emu.calls("PUT", r"/storageAccounts/") == []


def test_list_keys_refused_is_an_auth_error(store, store_env):
    emu, (data, sha) = store_env, payload()
    emu.inject("auth_401", method="POST", path=r"/listKeys$", times=None)
    with pytest.raises(AuthError, match="listing the keys"):
        store.stage("eastus", data, sha)


def test_arm_unavailable_gives_up_after_the_sdk_retries(store, store_env):
    emu, (data, sha) = store_env, payload()
    emu.inject("unavailable_503", method="PUT", path=r"/storageAccounts/[^/]+$", times=None)
    with pytest.raises(RetryExhaustedError, match="creating storage account"):
        store.stage("eastus", data, sha)
    # azure-core's RetryPolicy: the first try and 3 more (its retry_status default), then the classified error
    assert len(emu.calls("PUT", r"/storageAccounts/[^/]+$")) == 4


def test_blob_service_down_is_retry_exhausted(store, store_env, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("TRAINVM_AZURE_BLOB_ENDPOINT", f"https://127.0.0.1:{port}")
    data, sha = payload()
    with pytest.raises(RetryExhaustedError, match="reading payloads/.*network error after"):
        store.stage("eastus", data, sha)


def test_a_wrong_account_key_is_an_auth_error(store, store_env):
    emu, (data, sha) = store_env, payload()
    emu.state.storage_keys[account_name(SUB, "eastus")] = base64.b64encode(b"k" * 64).decode()
    with pytest.raises(AuthError, match="uploading|reading"):
        store.stage("eastus", data, sha)


# ---------------------------------------------------------------------------------------------- VM read access
def with_payload(spec, ref, name=None):
    return replace(spec, name=name or spec.name, payload=ref, labels={**spec.labels, PAYLOAD_LABEL: ref.sha256[:16]})


def reader_assignments(emu):
    return [r for r in emu.state.role_assignments.values() if r["roleDefinitionId"].endswith(BLOB_DATA_READER)]


def test_vm_identity_reads_the_container_and_down_keeps_the_store(store, store_env, provider, t4_spec, t4):
    emu, (data, sha) = store_env, payload()
    ref = store.stage("eastus", data, sha)
    spec = with_payload(t4_spec, ref)
    rec = provider.create(spec, t4)
    assert rec.payload == sha[:16]
    (ra,) = reader_assignments(emu)
    principal = emu.state.identities[own_identity_id(SUB, spec.name).lower()]["properties"]["principalId"]
    assert ra["principalId"] == principal and ra["principalType"] == "ServicePrincipal"
    assert ra["scope"] == container_scope(SUB, "eastus")
    assert provider.find(spec.name).payload == sha[:16]
    again = provider.create(spec, t4)  # a re-run adopts the VM; the assignment is found done
    assert again.adopted and len(reader_assignments(emu)) == 1
    assert provider.delete(spec.name)
    assert reader_assignments(emu) == []  # down removes the identity's assignment outside the VM's group
    assert emu.state.identities == {}  # and the identity with the group
    assert store_group("eastus") in emu.resource_groups() and sha in store.stored("eastus")


def test_refused_role_assignment_cleans_up_the_vm(store, store_env, provider, t4_spec, t4):
    emu, (data, sha) = store_env, payload()
    spec = replace(with_payload(t4_spec, store.stage("eastus", data, sha)), max_run_hours=None,
                   idle_shutdown_minutes=None)  # no lifecycle role: the payload reader is the one refused
    emu.state.deny_role_assignments = True
    with pytest.raises(AuthError, match="roleAssignments/write") as err:
        provider.create(spec, t4)
    assert "Storage Blob Data Reader" in (err.value.hint or "")
    assert err.value.cleanup == "verified"
    assert names(spec.name).rg not in emu.resource_groups()
    assert store_group("eastus") in emu.resource_groups()
    assert emu.calls("PUT", r"/virtualMachines/") == []  # issue 36 item 5: refused before anything bills


def test_deny_assignment_on_the_store_refuses_before_the_vm(store, store_env, provider, t4_spec, t4):
    """issue 36 item 5: the caller may write role assignments (Owner: the permissions API lists the action), but a
    deny assignment on the payload store's group refuses the reader (403 AuthorizationFailed). The lifecycle role had
    been made (on the VM's group): the cleanup deletes the group with it and the identity; no VM was ever requested."""
    emu, (data, sha) = store_env, payload()
    spec = replace(with_payload(t4_spec, store.stage("eastus", data, sha)), idle_shutdown_minutes=60)
    emu.deny(f"/subscriptions/{SUB}/resourceGroups/{store_group('eastus')}")
    with pytest.raises(AuthError, match="deny assignment") as err:
        provider.create(spec, t4)
    assert err.value.code == "AuthorizationFailed" and err.value.cleanup == "verified"
    assert "Storage Blob Data Reader" in (err.value.hint or "")
    assert emu.calls("PUT", r"/virtualMachines/") == []
    assert names(spec.name).rg not in emu.resource_groups()
    assert emu.state.identities == {} and emu.state.role_assignments == {}


def test_a_failed_vm_leaves_no_reader_assignment(store, store_env, provider, t4_spec, t4):
    """The reader is granted before the VM, outside its group: a VM that then fails (no capacity) has it removed by
    the cleanup before the group goes, so failover leaves no orphan assignment on the shared container."""
    emu, (data, sha) = store_env, payload()
    spec = with_payload(t4_spec, store.stage("eastus", data, sha))
    emu.inject("allocation_failed_lro", location="eastus")
    with pytest.raises(CapacityError) as err:
        provider.create(spec, t4)
    assert err.value.cleanup == "verified"
    assert reader_assignments(emu) == [] and emu.state.role_assignments == {} and emu.state.identities == {}
    assert names(spec.name).rg not in emu.resource_groups()


def test_scale_set_identity_reads_the_container(store, store_env, provider, t4_spec, t4):
    emu, (data, sha) = store_env, payload()
    spec = replace(with_payload(t4_spec, store.stage("eastus", data, sha)), nodes=2)
    rec = provider.create(spec, t4)
    assert rec.payload == sha[:16] and rec.cluster == spec.name
    (ra,) = reader_assignments(emu)
    vmss = emu.state.get(names(spec.name).rg, "Microsoft.Compute/virtualMachineScaleSets", spec.name)
    ident = own_identity_id(SUB, spec.name)
    assert ra["principalId"] == vmss["body"]["identity"]["userAssignedIdentities"][ident]["principalId"]
    assert provider.delete(spec.name) and reader_assignments(emu) == [] and emu.state.identities == {}


def test_down_refuses_the_payload_store_group(store, store_env, provider, t4_spec, t4):
    emu, (data, sha) = store_env, payload()
    store.stage("eastus", data, sha)
    with pytest.raises(ConflictError, match="payload store"):
        provider.delete("payload-eastus")  # its group would be trainvm-payload-eastus
    with pytest.raises(ConflictError, match="payload store"):
        provider.create(replace(t4_spec, name="payload-eastus"), t4)
    assert store_group("eastus") in emu.resource_groups() and sha in store.stored("eastus")


# ---------------------------------------------------------------------------------------------- the emulator itself
def test_emulator_checks_storage_bodies_against_the_sdk_models(emu):
    """The emulator refuses what Azure would: members the azure-mgmt-storage models do not have, values outside
    their enums, bad account names, public containers on a private account, prefixes without a container."""
    from azure.core.exceptions import HttpResponseError
    from azure.mgmt.resource.resources import ResourceManagementClient
    from azure.mgmt.storage import StorageManagementClient

    from provisioner.providers.azure.store import account_body, container_body, policy_body

    kw = emu.client_kwargs()
    st = StorageManagementClient(**kw)
    ResourceManagementClient(**kw).resource_groups.create_or_update("rg1", {"location": "eastus"})

    def code(fn):
        with pytest.raises(HttpResponseError) as err:
            fn()
        return err.value.error.code

    bad = account_body("eastus")
    bad["properties"]["allowBlobPublicAcess"] = False  # a typo
    assert code(lambda: st.storage_accounts.begin_create("rg1", "tvtest0001", bad).result()) == "InvalidRequestContent"
    bad = account_body("eastus")
    bad["properties"]["minimumTlsVersion"] = "TLS9"
    assert code(lambda: st.storage_accounts.begin_create("rg1", "tvtest0001", bad).result()) == "InvalidRequestContent"
    assert code(lambda: st.storage_accounts.begin_create("rg1", "TV_bad", account_body("eastus")).result()) == \
        "AccountNameInvalid"
    st.storage_accounts.begin_create("rg1", "tvtest0001", account_body("eastus")).result()
    public = {"properties": {"publicAccess": "Blob"}}
    assert code(lambda: st.blob_containers.create("rg1", "tvtest0001", "c01", public)) == "PublicAccessNotPermitted"
    st.blob_containers.create("rg1", "tvtest0001", "c01", container_body())
    p = policy_body()
    p["properties"]["policy"]["rules"][0]["definition"]["filters"]["prefixMatch"] = ["/payloads/"]
    assert code(lambda: st.management_policies.create_or_update("rg1", "tvtest0001", "default", p)) == \
        "InvalidManagementPolicyRule"
    del p["properties"]["policy"]["rules"][0]["type"]
    assert code(lambda: st.management_policies.create_or_update("rg1", "tvtest0001", "default", p)) == \
        "InvalidParameter"  # required by the model (ManagementPolicyRule.type)
    keys = st.storage_accounts.list_keys("rg1", "tvtest0001").as_dict()["keys"]  # .keys is the Mapping method
    assert [k["keyName"] for k in keys] == ["key1", "key2"] and all(k["value"] for k in keys)
