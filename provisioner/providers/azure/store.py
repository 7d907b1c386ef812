"""The Azure payload store (providers/store.py): Blob Storage, one storage account per subscription and region.

Control plane (azure-mgmt-storage, on the provider's ARM credential and pipeline: ``azure_clients``):

- resource group ``trainvm-payload-<region>`` tagged ``trainvm-managed=true`` and ``trainvm-payload-store=true``.
  It is not a VM's group (those are ``trainvm-<VM name>``, deleted by ``down``): ``down`` and a failed create's
  cleanup refuse a group carrying the store tag (``AzureProvider.delete``, ``GroupLease.prepare_group``).
- in it one StorageV2 account (Standard_LRS) named ``tv`` + 22 hex of sha256(subscription, region): storage
  account names are 3-24 characters, lowercase letters and digits only, and globally unique (Microsoft's
  Az.Functions ``AccountName`` description; PSRule ``Azure.Storage.Name``). The name is deterministic, so every
  ``up`` of the subscription finds the same account. Someone else may hold it: before creating anything in a region
  without a store, ``checkNameAvailability`` is asked (reason ``AlreadyExists``: learn.microsoft.com/rest/api/
  storagerp/storage-accounts/check-name-availability), and a name taken after that answer is the create's 409
  ``StorageAccountAlreadyTaken`` ("The storage account named X is already taken.", public Terraform/azure-cli issue
  reports), after which the group this stage created is deleted again. Both are a ``RegionUnavailableError``:
  ``up`` skips that region's offers and fails over to the next region (issue 36 item 7). Settings:
  ``allowBlobPublicAccess=false``, ``minimumTlsVersion=TLS1_2``, ``supportsHttpsTrafficOnly=true``,
  ``allowSharedKeyAccess=true`` (the upload below signs with the key; a policy that forbids shared keys makes the
  create fail with that policy's error).
- a private container ``trainvm`` (control-plane PUT, ``publicAccess: None``); blob names are
  ``payload_key(sha256)`` = ``payloads/<sha256>.tar.gz``, so the URL is
  ``https://<account>.blob.core.windows.net/trainvm/payloads/<sha256>.tar.gz``.
- the account's management (lifecycle) policy ``default``: one rule deleting block blobs under
  ``trainvm/payloads/`` (a prefix starts with the container name) ``EXPIRE_DAYS`` after their last modification.

Data plane (azure-storage-blob) with the account key from ``listKeys``, not an Entra token: Owner, Contributor
and Storage Account Contributor manage an account but hold no blob *data* role (Microsoft Q&A 94152), so a
Contributor-only user's token upload would be refused, while ``listKeys`` (``Microsoft.Storage/storageAccounts/
listkeys/action``) is within Contributor's ``*`` actions. The key never leaves this process. An upload is one
Put Blob request (``max_single_put_size`` above the payload's size), so no half-written object is ever
visible; it happens only when the blob is missing, has another size, or was last modified more than
``REFRESH_DAYS`` ago (the lifecycle rule counts from the last modification, so a re-upload restarts it).

The VM reads with its own identity: its system-assigned managed identity gets Storage Blob Data Reader on the
container (``azure_roles.grant_payload_reader``), and ``templates/bootstrap/fetch-azure.sh`` fetches with an
IMDS token.

``TRAINVM_AZURE_BLOB_ENDPOINT`` replaces ``https://<account>.blob.core.windows.net`` by
``<endpoint>/<account>`` (Azurite's path style, in tests). Failures are classified by ``azure_errors`` (Blob
Storage's XML error code included); retries are the SDKs' own: azure-core's RetryPolicy on ARM calls,
azure-storage-blob's ExponentialRetry (3 retries, first backoff ``TRAINVM_RETRY_BASE_DELAY``) on blob calls.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict, TypeVar, cast, overload

from provisioner import settings
from provisioner.providers.azure import errors as errs
from provisioner.providers.azure.api import AzureApi
from provisioner.providers.base import (
    AuthError,
    ConflictError,
    InvalidRequestError,
    ProviderError,
    RegionUnavailableError,
)
from provisioner.providers.store import EXPIRE_DAYS, PAYLOAD_PREFIX, REFRESH_DAYS, PayloadRef, payload_key

if TYPE_CHECKING:
    from azure.storage.blob import BlobServiceClient, ExponentialRetry

    from provisioner.providers.azure.sdk import Storage

T = TypeVar("T")
M = TypeVar("M")

CONTAINER = "trainvm"
STORE_TAG = "trainvm-payload-store"
TAGS = {"trainvm-managed": "true", STORE_TAG: "true"}
POLICY_RULE = "trainvm-payload-expiry"
#: built-in role definition id of Storage Blob Data Reader (the same GUID in every subscription)
BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
TAKEN_CODES = frozenset({"StorageAccountAlreadyTaken", "StorageAccountAlreadyExists"})
_MISSING = object()


def store_group(region: str) -> str:
    """The resource group of a region's payload store (never one of the per-VM ``trainvm-<name>`` groups)."""
    return f"trainvm-payload-{region}"


def account_name(subscription_id: str, region: str) -> str:
    """``tv`` + 22 hex: 24 lowercase alphanumerics, the same for every ``up`` in this subscription and region."""
    return "tv" + hashlib.sha256(f"trainvm-payload:{subscription_id.lower()}:{region.lower()}".encode()).hexdigest()[:22]


def container_scope(subscription_id: str, region: str) -> str:
    """The container's ARM id: the scope of the VMs' Storage Blob Data Reader assignments."""
    return (f"/subscriptions/{subscription_id}/resourceGroups/{store_group(region)}/providers/Microsoft.Storage/"
            f"storageAccounts/{account_name(subscription_id, region)}/blobServices/default/containers/{CONTAINER}")


def account_body(region: str) -> dict[str, object]:
    """The storageAccounts PUT body (StorageAccountCreateParameters)."""
    return {"location": region, "kind": "StorageV2", "sku": {"name": "Standard_LRS"}, "tags": dict(TAGS),
            "properties": {"allowBlobPublicAccess": False, "minimumTlsVersion": "TLS1_2",
                           "supportsHttpsTrafficOnly": True, "allowSharedKeyAccess": True, "accessTier": "Hot"}}


def container_body() -> dict[str, object]:
    return {"properties": {"publicAccess": "None", "metadata": {"trainvm": "payloads"}}}


def policy_body() -> dict[str, object]:
    """The management policy: delete payload blobs EXPIRE_DAYS after their last upload."""
    return {"properties": {"policy": {"rules": [{
        "name": POLICY_RULE, "enabled": True, "type": "Lifecycle",
        "definition": {"filters": {"blobTypes": ["blockBlob"], "prefixMatch": [f"{CONTAINER}/{PAYLOAD_PREFIX}"]},
                       "actions": {"baseBlob": {"delete": {"daysAfterModificationGreaterThan": EXPIRE_DAYS}}}}}]}}}


class _Endpoints(TypedDict, total=False):
    blob: str


class _AccountProps(TypedDict, total=False):
    primaryEndpoints: _Endpoints


class _Key(TypedDict, total=False):
    keyName: str
    value: str


class StorageDoc(TypedDict, total=False):
    """The fields read of the storage answers (learn.microsoft.com/rest/api/storagerp/storage-accounts: get-properties,
    list-keys, check-name-availability)."""

    properties: _AccountProps
    keys: list[_Key]
    nameAvailable: bool
    reason: str
    message: str


def _wire(obj: object) -> StorageDoc:
    """An azure-mgmt-storage model as its JSON (the typed adapter: the SDK's models stop here)."""
    if obj is None:
        return {}
    as_dict = getattr(obj, "as_dict", None)
    return cast(StorageDoc, as_dict() if as_dict is not None else dict(obj))  # type: ignore[call-overload]


class _BlobKwargs(TypedDict, total=False):
    """The keywords ``_service`` gives ``BlobServiceClient`` (azure-storage-blob's documented client options)."""

    connection_timeout: float
    read_timeout: float
    max_single_put_size: int
    retry_policy: ExponentialRetry
    connection_verify: str


@dataclass(frozen=True)
class _Account:
    name: str
    group: str
    key: str
    endpoint: str  # the blob service URL, no trailing slash


class BlobPayloadStore:
    """``PayloadStore`` on Azure Blob Storage, on the subscription and credentials of an ``AzureProvider``'s API client.
    ``now``: the clock compared with a blob's last modification (tests move it forward)."""

    def __init__(self, api: AzureApi, *, now: Callable[[], dt.datetime] | None = None) -> None:
        self.api = api
        self._now = now or (lambda: dt.datetime.now(dt.UTC))
        self._mgmt: Storage | None = None
        self._ready: dict[str, _Account] = {}

    # ------------------------------------------------------------------ the contract
    def stage(self, region: str, data: bytes, sha256: str) -> PayloadRef:
        if hashlib.sha256(data).hexdigest() != sha256:
            raise InvalidRequestError("the payload's bytes do not have the sha256 they were staged under",
                                      code="PayloadHashMismatch")
        acct = self._ensure(region)
        key = payload_key(sha256)
        blob = self._service(acct).get_blob_client(CONTAINER, key)
        props = self._data(lambda: blob.get_blob_properties(), what=f"reading {key}", missing=None)
        fresh = props is not None and props.size == len(data) and \
            props.last_modified > self._now() - dt.timedelta(days=REFRESH_DAYS)
        if not fresh:
            from azure.storage.blob import ContentSettings

            self._data(lambda: blob.upload_blob(data, overwrite=True, metadata={"sha256": sha256},
                                                content_settings=ContentSettings(content_type="application/gzip")),
                       what=f"uploading {key}")
        return PayloadRef(cloud="azure", region=region, store=f"{acct.name}/{CONTAINER}", key=key,
                          url=f"{acct.endpoint}/{CONTAINER}/{key}", sha256=sha256, size=len(data),
                          access=f"Storage Blob Data Reader on container {CONTAINER} of storage account {acct.name}",
                          uploaded=not fresh, refreshed=props is not None and not fresh)

    def release(self, region: str, sha256: str) -> bool:
        acct = self._existing(region)
        if acct is None:
            return False
        blob = self._service(acct).get_blob_client(CONTAINER, payload_key(sha256))
        return self._data(lambda: (blob.delete_blob(), True)[1], what=f"deleting {payload_key(sha256)}",
                          missing=False)

    def stored(self, region: str) -> list[str]:
        acct = self._existing(region)
        if acct is None:
            return []
        container = self._service(acct).get_container_client(CONTAINER)
        names = self._data(lambda: [b.name for b in container.list_blobs(name_starts_with=PAYLOAD_PREFIX)],
                           what="listing the payloads", missing=[])
        suffix = ".tar.gz"
        return sorted(n[len(PAYLOAD_PREFIX):-len(suffix)] for n in names if n.endswith(suffix))

    # ------------------------------------------------------------------ control plane
    def storage(self) -> Storage:
        if self._mgmt is None:
            self._mgmt = self.api.storage()
        return self._mgmt

    def _ensure(self, region: str) -> _Account:
        """The region's store, created or completed (group, account, container, lifecycle policy) once per process."""
        if region in self._ready:
            return self._ready[region]
        sub, rg = self.api.subscription_id, store_group(region)
        name, api = account_name(sub, region), self.api.clients()
        group = self.api.get_group(rg)
        if group is not None and (group.get("tags") or {}).get(STORE_TAG) != "true":
            raise ConflictError(f"resource group {rg} exists and is not trainvm's payload store (no {STORE_TAG} tag); "
                                "trainvm keeps the payloads of this region there", code="PayloadStoreGroupTaken")
        st = self.storage()
        account = self._arm(lambda: st.storage_accounts.get_properties(rg, name), f"reading storage account {name}",
                            missing=None) if group is not None else None
        if account is None:
            if group is None:  # nothing is created in a region until the account name is known to be free
                self._check_name(region, name)
                self._arm(lambda: api.resource.resource_groups.create_or_update(
                    rg, {"location": region, "tags": dict(TAGS)}), f"creating resource group {rg}")
            account = self._create_account(region, rg, name)
        self._arm(lambda: st.blob_containers.create(rg, name, CONTAINER, container_body()),
                  f"creating container {CONTAINER} in {name}")
        self._arm(lambda: st.management_policies.create_or_update(rg, name, "default", policy_body()),
                  f"setting the lifecycle policy of {name}")
        acct = self._account(rg, name, _wire(account))
        self._ready[region] = acct
        return acct

    def _check_name(self, region: str, name: str) -> None:
        """Storage's checkNameAvailability (StorageAccounts_CheckNameAvailability,
        https://learn.microsoft.com/rest/api/storagerp/storage-accounts/check-name-availability): reason
        ``AlreadyExists`` while this subscription has no account of that name means someone else holds it."""
        out = _wire(self._arm(lambda: self.storage().storage_accounts.check_name_availability(
            {"name": name, "type": "Microsoft.Storage/storageAccounts"}), f"checking the storage account name {name}"))
        if out.get("nameAvailable") is False and out.get("reason") == "AlreadyExists":
            raise self._taken(region, name, str(out.get("message") or "AlreadyExists"), "StorageAccountAlreadyTaken")

    def _create_account(self, region: str, rg: str, name: str) -> object:
        """Create the account in the store's group. Its name taken (409 StorageAccountAlreadyTaken: by someone else
        since ``_check_name``, or a group left by an earlier trainvm): the group, trainvm's and without its account,
        is deleted (awaited and checked gone) and RegionUnavailableError raised."""
        st = self.storage()
        try:
            poller = self._arm(lambda: st.storage_accounts.begin_create(rg, name, account_body(region)),
                               f"creating storage account {name}", account=name, region=region)
            return self.api.wait(poller, self.api.clock() + self.api.op_timeout, f"storage account {name}")
        except RegionUnavailableError as exc:
            self._drop_group(rg, exc)
            raise

    def _drop_group(self, rg: str, exc: ProviderError) -> None:
        """Delete the (empty) store group this ``stage`` created; ``exc`` is verified once ARM answers "not found"."""
        try:
            self.api.delete_group(rg, wait=True)
            if self.api.get_group(rg) is None:
                exc.verified()
                return
            note = f"resource group {rg} still exists after its deletion"
        except ProviderError as err:
            note = f"deleting resource group {rg} failed ({err})"
        exc.args = (f"{exc}; {note}: delete it with `az group delete -n {rg}` (it is empty)",)

    def _taken(self, region: str, name: str, detail: str, code: str) -> RegionUnavailableError:
        return RegionUnavailableError(
            f"the storage account name {name} (trainvm's payload store for this subscription in {region}) is taken by "
            f"another subscription or tenant ({errs._short(detail)}); trainvm cannot stage payloads in {region}, so "
            "its offers are skipped", code=code,
            hint=f"storage account names are global and trainvm derives this one from the subscription id and the "
                 f"region; {region} stays unusable for payloads in this subscription while someone else holds the name "
                 "(or until a recently deleted account's name is released): leave it out of placement.regions")

    def _existing(self, region: str) -> _Account | None:
        """The region's store when it exists (nothing is created); None otherwise."""
        if region in self._ready:
            return self._ready[region]
        rg, name = store_group(region), account_name(self.api.subscription_id, region)
        account = self._arm(lambda: self.storage().storage_accounts.get_properties(rg, name),
                            f"reading storage account {name}", missing=None)
        return None if account is None else self._account(rg, name, _wire(account))

    def _account(self, rg: str, name: str, account: StorageDoc) -> _Account:
        keys = _wire(self._arm(lambda: self.storage().storage_accounts.list_keys(rg, name),
                               f"listing the keys of storage account {name}")).get("keys") or []
        key = next((k.get("value") for k in keys if k.get("value")), None)
        if not key:
            raise ProviderError(f"storage account {name} returned no account key", code="NoAccountKey")
        override = settings.text("TRAINVM_AZURE_BLOB_ENDPOINT").strip().rstrip("/")
        blob = ((account.get("properties") or {}).get("primaryEndpoints") or {}).get("blob")
        endpoint = f"{override}/{name}" if override else (blob or f"https://{name}.blob.core.windows.net").rstrip("/")
        return _Account(name, rg, key, endpoint)

    @overload
    def _arm(self, fn: Callable[[], T], what: str, *, account: str | None = None, region: str = "") -> T: ...

    @overload
    def _arm(self, fn: Callable[[], T], what: str, *, missing: M, account: str | None = None,
             region: str = "") -> T | M: ...

    def _arm(self, fn: Callable[[], T], what: str, *, missing: object = _MISSING, account: str | None = None,
             region: str = "") -> object:
        try:
            return fn()
        except Exception as exc:
            if not errs.is_sdk_error(exc):
                raise
            f = errs.from_exception(exc)
            if f.status == 404 and missing is not _MISSING and f.code not in ("SubscriptionNotFound", "InvalidSubscriptionId"):
                return missing
            if account and f.code in TAKEN_CODES:
                raise self._taken(region, account, f.message, f.code) from exc
            err = errs.classify(f)
            err.args = (f"{what}: {err}",)
            if isinstance(err, AuthError):
                err.hint = ("the payload store needs, on the subscription or resource group "
                            "trainvm-payload-<region>: Microsoft.Resources/subscriptions/resourceGroups/write, "
                            "Microsoft.Storage/storageAccounts/write and .../listkeys/action (Contributor or Storage "
                            "Account Contributor + resource group write)")
            raise err from exc

    # ------------------------------------------------------------------ data plane
    def _service(self, acct: _Account) -> BlobServiceClient:
        from azure.storage.blob import BlobServiceClient, ExponentialRetry

        backoff = self.api.settings.retry_backoff
        kw: _BlobKwargs = {"connection_timeout": max(0.5, self.api.settings.call_timeout / 2),
                           "read_timeout": max(0.5, self.api.settings.call_timeout / 2),
                           "max_single_put_size": 256 * 1024 * 1024,  # one Put Blob: never a half-written object
                           # the SDK annotates these int; they are seconds, used as floats (random.uniform, sleep)
                           "retry_policy": ExponentialRetry(initial_backoff=backoff,  # type: ignore[arg-type]
                                                            increment_base=2 if backoff else 0, retry_total=3,
                                                            random_jitter_range=backoff)}  # type: ignore[arg-type]
        if os.environ.get("REQUESTS_CA_BUNDLE"):
            kw["connection_verify"] = os.environ["REQUESTS_CA_BUNDLE"]
        return BlobServiceClient(acct.endpoint, credential={"account_name": acct.name, "account_key": acct.key}, **kw)

    @overload
    def _data(self, fn: Callable[[], T], *, what: str) -> T: ...

    @overload
    def _data(self, fn: Callable[[], T], *, what: str, missing: M) -> T | M: ...

    def _data(self, fn: Callable[[], T], *, what: str, missing: object = _MISSING) -> object:
        try:
            return fn()
        except Exception as exc:
            if not errs.is_sdk_error(exc):
                raise
            f = errs.from_exception(exc)
            if f.status == 404 and missing is not _MISSING and f.code in (None, "BlobNotFound", "ResourceNotFound",
                                                                          "ContainerNotFound"):
                return missing
            err = errs.classify(f)
            if isinstance(err, AuthError):
                err.hint = ("Blob Storage refused the account key (rotated while trainvm ran, or the account forbids "
                            "shared-key access: allowSharedKeyAccess=false)")
            err.args = (f"{what}: {err}",)
            raise err from exc
