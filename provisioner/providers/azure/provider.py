"""Azure provider (azure-mgmt-compute / -network / -resource, azure-identity).

Thin on purpose: request bodies come from ``azure_request`` (pure), failures are classified by
``azure_errors``; this module makes the SDK calls. The SDKs are imported on first use (cloud-sdks.md §5),
so ``get_provider("azure")`` stays cheap until a cloud call is made.

- Settings, credentials and clients: ``azure_clients`` (AZURE_SUBSCRIPTION_ID, TRAINVM_AZURE_ACCESS_TOKEN or
  DefaultAzureCredential, TRAINVM_AZURE_ENDPOINT, TRAINVM_AZURE_POLL_SECONDS, TRAINVM_RETRY_BASE_DELAY;
  resource-provider auto-registration off). ``TRAINVM_AZURE_OP_TIMEOUT`` (default 900 s) bounds every wait.
- Create (``azure_create``, one transaction for 1..N nodes; its compute step, ``azure_compute``, is a VM for one
  node and a Uniform scale set for N): resource group -> VNet + NSG -> VM -> the VM identity's role assignment; a
  transaction with an owner (the attempt id on the group's lease and on the VM): an existing VM of this profile
  is adopted, a racing ``up``'s VM is joined, never written over or deleted; any failed attempt deletes its
  resource group (``azure_lease``: only a group holding no VM of another live attempt), waits for that and
  checks the group is gone (error ``cleanup`` "verified"), else records it in ``left_behind`` (``provision``
  then stops, since the next region would reuse the name). An interrupted process (Ctrl-C) leaves the group
  to the re-run.
- Payloads (``payload_store``: azure_store.BlobPayloadStore): a staged ``spec.payload`` gets the VM's (or scale
  set's) identity Storage Blob Data Reader on its container after the lifecycle role (azure_roles); ``down``
  removes that assignment, and never deletes a payload store's group (``trainvm-payload-<region>``).
- Not found vs wrong credentials: a 404 is "missing" only for a resource or group; ``SubscriptionNotFound``
  (a mistyped or invisible subscription) is an AuthError naming the subscription.
- Long-running operations: ``poller.result(timeout)`` then ``poller.done()`` (``result`` returns quietly on
  timeout). A failed VM operation's code comes from the exception, or from the instance view when the
  operation was polled through ``provisioningState`` (no code in the exception).
- The resolved profile lives in the VM's ``userData``; ``read_report`` runs ``RunShellScript`` (report
  gzip'd + base64'd: Run Command keeps 4 KiB) and falls back to the boot-diagnostics serial log.
"""

from __future__ import annotations

import builtins
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from provisioner import settings
from provisioner.errors import InputError
from provisioner.providers.azure import errors as errs
from provisioner.providers.azure import group as azure_group
from provisioner.providers.azure import request as R
from provisioner.providers.azure.clients import Settings, default_credential, make_clients
from provisioner.providers.azure.create import CreateTransaction
from provisioner.providers.azure.lease import MANAGED, GroupLease, _props, refuse_store_group
from provisioner.providers.azure.power import latest_start, power, vm_state
from provisioner.providers.azure.preflight import preflight
from provisioner.providers.azure.roles import payload_scope, revoke_payload_reader
from provisioner.providers.azure.store import CONTAINER, BlobPayloadStore, account_name
from provisioner.providers.base import (
    ConflictError,
    InstanceRecord,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
    costs_from_labels,
    price_from_labels,
)
from provisioner.providers.capabilities import ClusterReader, ImagePinner, Preflighter
from provisioner.providers.offer import Offer
from provisioner.providers.registry import image_refs
from provisioner.providers.ssh_key import SSH_KEY_FILES, read_public_key
from provisioner.providers.stack_report import StackReport, decode_report, last_console_report
from provisioner.providers.store import PAYLOAD_LABEL, PayloadRef

if TYPE_CHECKING:
    from provisioner.providers.azure.store import BlobPayloadStore

__all__ = ["AzureProvider", "vm_state"]

NOT_MISSING = frozenset({"SubscriptionNotFound", "InvalidSubscriptionId"})  # 404s that are not "no such resource"
RUN_COMMAND_TIMEOUT = 300.0
_MISSING = object()


def _wire(obj: Any) -> dict[str, Any]:
    """A hybrid SDK model (or a plain dict) as its ARM JSON."""
    if obj is None:
        return {}
    return obj.as_dict() if hasattr(obj, "as_dict") else dict(obj)


def _group_of(vm: dict[str, Any]) -> str:
    """The VM's resource group, from its id (``/subscriptions/S/resourceGroups/RG/...``)."""
    parts = (vm.get("id") or "").split("/")
    return parts[4] if len(parts) > 4 and parts[3].lower() == "resourcegroups" else R.names(vm.get("name") or "").rg


class AzureProvider(CreateTransaction, GroupLease, ImagePinner, Preflighter, ClusterReader):
    NAME = "azure"

    def __init__(self, *, subscription_id: str | None = None, endpoint: str | None = None, credential: Any = None,
                 poll_seconds: float | None = None, op_timeout: float | None = None, retry_total: int = 6,
                 retry_backoff: float | None = None, ssh_public_key: str | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = Settings.from_env(subscription_id=subscription_id, endpoint=endpoint, poll_seconds=poll_seconds,
                                          op_timeout=op_timeout, retry_total=retry_total, retry_backoff=retry_backoff)
        self.subscription_id, self.poll_seconds = self.settings.subscription_id, self.settings.poll_seconds
        self.op_timeout = self.settings.op_timeout
        self._credential, self._ssh_key_path, self._sleep, self._clock = credential, ssh_public_key, sleep, clock
        self._api: SimpleNamespace | None = None
        self._images: dict[tuple[str, str, str, str], str] = {}

    def api(self) -> SimpleNamespace:
        """The three management clients (built once, on first use: the SDK imports happen here)."""
        if self._api is None:
            self._credential = self._credential or default_credential()
            self._api = make_clients(self.settings, self._credential)
        return self._api

    # ------------------------------------------------------------------ calls and waiting
    def _call(self, fn: Callable[[], Any], *, missing: Any = _MISSING) -> Any:
        """One SDK call (azure-core retries throttling/5xx itself); 404 -> ``missing`` when given."""
        try:
            return fn()
        except Exception as exc:
            if not errs.is_sdk_error(exc):
                raise
            f = errs.from_exception(exc)
            if f.status == 404 and missing is not _MISSING and f.code not in NOT_MISSING:
                return missing
            raise errs.classify(f) from exc

    def _wait(self, poller: Any, deadline: float, what: str) -> Any:
        """The poller's result within the deadline; RetryExhaustedError when it is still running."""
        result = self._call(lambda: poller.result(timeout=max(0.0, deadline - self._clock())))
        if not poller.done():
            raise RetryExhaustedError(f"{what} did not finish within {self.op_timeout:g} s (TRAINVM_AZURE_OP_TIMEOUT)",
                                      code="OperationTimeout")
        return result

    def _get_vm(self, rg: str, name: str, expand: str | None = "instanceView") -> dict[str, Any] | None:
        vm = self._call(lambda: self.api().compute.virtual_machines.get(rg, name, expand=expand), missing=None)
        return None if vm is None else _wire(vm)

    def _get_group(self, rg: str) -> dict[str, Any] | None:
        g = self._call(lambda: self.api().resource.resource_groups.get(rg), missing=None)
        return None if g is None else _wire(g)

    def _ip(self, rg: str, name: str) -> str | None:
        pip = self._call(lambda: self.api().network.public_ip_addresses.get(rg, R.names(name).pip), missing=None)
        return _props(_wire(pip)).get("ipAddress") if pip is not None else None

    # ------------------------------------------------------------------ building the request
    def ssh_public_key(self) -> str:
        """The admin user's key: $TRAINVM_SSH_PUBLIC_KEY (a path), else ~/.ssh/id_ed25519.pub or id_rsa.pub."""
        configured = self._ssh_key_path or settings.text("TRAINVM_SSH_PUBLIC_KEY") or None
        key = read_public_key(configured)
        if key is not None:
            return key
        raise InputError("no SSH public key found for the Azure VM's admin user (password login stays disabled)",
                         hint="create one with `ssh-keygen -t ed25519`, or set TRAINVM_SSH_PUBLIC_KEY to a .pub file")

    def resolve_image(self, location: str, image: R.ImageRef) -> R.ImageRef:
        """``image`` pinned to the highest version published in ``location`` now (cached)."""
        key = (location, image.publisher, image.offer, image.sku)
        if key not in self._images:
            found = self._call(lambda: self.api().compute.virtual_machine_images.list(
                location, image.publisher, image.offer, image.sku), missing=[])

            def order(v: str) -> tuple[Any, ...]:
                return tuple((0, int(p)) if p.isdigit() else (1, p) for p in v.split("."))

            versions = sorted((_wire(v).get("name") or "" for v in found), key=order)
            if not versions or not versions[-1]:  # another region may have it: not a reason to stop failover
                raise ProviderError(f"no version of image {image.urn} is published in {location}",
                                    code="PlatformImageNotFound")
            self._images[key] = versions[-1]
        return R.ImageRef(image.publisher, image.offer, image.sku, self._images[key])

    def pin_image(self, os_name: str) -> dict[str, str]:
        """What ``trainvm lock`` records: the newest version of the OS's (Gen2) image, as published in
        ``TRAINVM_AZURE_IMAGE_LOCATION`` (default eastus; Marketplace versions are the same names everywhere)."""
        ref = image_refs(os_name).get(self.NAME)
        if not ref:
            raise R.InvalidRequestError(f"no Azure image is known for OS {os_name!r}", code="ImageUnknown")
        location = settings.text("TRAINVM_AZURE_IMAGE_LOCATION", "eastus")
        found = self.resolve_image(location, R.ImageRef(ref["publisher"], ref["offer"], ref["sku"]))
        return {"version": found.version, "location": location}

    def image_for(self, spec: LaunchSpec, offer: Offer) -> R.ImageRef:
        """NAME.lock's pinned version when the lock pinned this very image (a Gen1-only size boots another
        SKU), else the newest version published in the offer's region."""
        wanted = R.image_for(spec.os, offer)
        pin = spec.locked_images.get(self.NAME, {})
        if pin.get("version") and (pin.get("publisher"), pin.get("offer"), pin.get("sku")) == (wanted.publisher, wanted.offer, wanted.sku):
            return R.ImageRef(wanted.publisher, wanted.offer, wanted.sku, pin["version"])
        return self.resolve_image(offer.region, wanted)

    # ------------------------------------------------------------------ the contract
    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        if offer.cloud != self.NAME:
            raise ProviderError(f"not an Azure offer: {offer.describe(spec.spot)}", code="NotAzure")
        key = self.ssh_public_key()  # input problems surface before any cloud call
        R.custom_data(spec)
        R.user_data(spec)
        return self._create(spec, offer, key)  # azure_create: one transaction for 1..N nodes

    def find(self, name: str) -> InstanceRecord | None:
        n = R.names(name)
        vm = self._get_vm(n.rg, name)
        if vm is None:
            return azure_group.find(self, name)  # a cluster's rank-0 node, or None
        if (vm.get("tags") or {}).get(MANAGED) != "true":
            return None
        return self._record(vm)

    def cluster_nodes(self, name: str) -> builtins.list[InstanceRecord]:
        return azure_group.cluster_nodes(self, name)

    def read_cluster_reports(self, name: str) -> dict[str, StackReport | None]:
        return azure_group.read_cluster_reports(self, name)

    def list(self) -> list[InstanceRecord]:
        api = self.api()
        vms = [_wire(v) for v in self._call(lambda: list(api.compute.virtual_machines.list_all(status_only="true")))]
        vms = [v for v in vms if (v.get("tags") or {}).get(MANAGED) == "true"]
        ips: dict[str, str] = {}
        if vms:
            for pip in self._call(lambda: [_wire(p) for p in api.network.public_ip_addresses.list_all()]):
                if _props(pip).get("ipAddress"):
                    ips[(pip.get("id") or "").lower()] = _props(pip)["ipAddress"]
        out = []
        for vm in vms:
            pip_id = R.resource_id(self.subscription_id, _group_of(vm), f"{R.NET}/publicIPAddresses", R.names(vm["name"]).pip)
            out.append(self._record(vm, ip=ips.get(pip_id.lower(), "")))
        out.extend(azure_group.list_nodes(self))  # one record per cluster node
        return sorted(out, key=lambda r: (r.name, r.region))

    def delete(self, name: str, *, wait: bool = True) -> bool:
        rg = R.names(name).rg
        group = self._get_group(rg)
        if group is None:
            return False
        refuse_store_group(group, rg)
        if (group.get("tags") or {}).get(MANAGED) != "true":
            raise ConflictError(f"resource group {rg} is not managed by trainvm (no {MANAGED}=true tag); not deleting it")
        self._revoke_payload_reader(name, rg)
        return self._delete_group(rg, wait=wait)

    def preflight(self, profile: Any, name: str, regions: builtins.list[str]) -> dict[str, Any]:
        """Before ``up`` creates anything: may this caller make the role assignments (or is the user-assigned
        identity usable)? azure_preflight; AuthError names the choices when not."""
        return preflight(self, profile, name, regions)

    def payload_store(self) -> BlobPayloadStore:
        """The payload store on Blob Storage (providers/azure/store.py), on this provider's subscription."""
        return BlobPayloadStore(self)

    def _revoke_payload_reader(self, name: str, rg: str) -> None:
        """Remove the VM's (or scale set's) Storage Blob Data Reader assignment on the payload container: it lives
        outside the VM's group, so deleting the group leaves it (an orphan "Identity not found" assignment that
        counts against the subscription's role-assignment limit). Best effort: a failure leaves only that orphan."""
        try:
            own = self._call(lambda: self.api().resource.resources.get_by_id(
                R.own_identity_id(self.subscription_id, name), api_version=R.IDENTITY_API), missing=None)
            if own is not None:  # trainvm's own identity (issue 36 item 5): read even when the VM is gone or never was
                ident = _wire(own)
                if not (ident.get("tags") or {}).get(PAYLOAD_LABEL):
                    return
                principal, region = (ident.get("properties") or {}).get("principalId"), ident.get("location")
            else:  # a VM made by an older trainvm: its system-assigned identity
                res = self._get_vm(rg, name, expand=None)
                if res is None:
                    res = azure_group.get_scale_set(self, name)
                if not res or not (res.get("tags") or {}).get(PAYLOAD_LABEL):
                    return
                principal, region = (res.get("identity") or {}).get("principalId"), res.get("location")
            if not principal or not region:
                return
            region = str(region)
            ref = PayloadRef(cloud="azure", region=region, store=f"{account_name(self.subscription_id, region)}/{CONTAINER}",
                             key="", url="", sha256="", size=0)
            revoke_payload_reader(self, payload_scope(self.subscription_id, ref), principal)
        except ProviderError:
            return

    def stop(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return power(self, name, "stop", wait=wait) or azure_group.power(self, name, "stop", wait=wait)

    def start(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return power(self, name, "start", wait=wait) or azure_group.power(self, name, "start", wait=wait)

    def read_report(self, name: str) -> tuple[StackReport | None, dict[str, Any] | None]:
        n = R.names(name)
        vm = self._get_vm(n.rg, name, expand="userData")
        if vm is None:
            return azure_group.read_report(self, name)  # a cluster: rank 0's report
        if (vm.get("tags") or {}).get(MANAGED) != "true":
            return None, None
        profile = R.decode_user_data(_props(vm).get("userData"))
        return self._run_command_report(n) or self._serial_report(n), profile

    def _run_command_report(self, n: R.Names) -> StackReport | None:
        cmd = {"commandId": "RunShellScript", "script": list(R.REPORT_SCRIPT)}
        deadline = self._clock() + min(self.op_timeout, RUN_COMMAND_TIMEOUT)
        try:
            poller = self._call(lambda: self.api().compute.virtual_machines.begin_run_command(n.rg, n.vm, cmd))
            result = _wire(self._wait(poller, deadline, f"run command on {n.vm}"))
        except ProviderError:  # not running, agent not ready, busy...: the serial log may still have it
            return None
        message = "".join((s.get("message") or "") for s in result.get("value") or [])
        return decode_report(R.run_command_stdout(message))

    def _serial_report(self, n: R.Names) -> StackReport | None:
        return last_console_report(self._serial_log(n))

    def live_status(self, record: InstanceRecord) -> str | None:
        return None  # no channel besides the console (CloudSpec.live_status)

    def console(self, name: str, start: int = 0) -> tuple[str, int] | None:
        """The boot-diagnostics serial log from character ``start`` (Azure refreshes the blob every
        few minutes, so it lags the VM); None when there is no such trainvm VM."""
        n = R.names(name)
        vm = self._get_vm(n.rg, name)
        if vm is None:
            return azure_group.console(self, name, start)  # a cluster: rank 0's serial log
        if (vm.get("tags") or {}).get(MANAGED) != "true":
            return None
        text = self._serial_log(n) or ""
        return text[start:], max(len(text), start)

    def ssh_argv(self, record: InstanceRecord, command: builtins.list[str]) -> builtins.list[str]:
        if not record.ip:
            raise InputError(f"{record.name} has no public IP address (yet)")
        configured = self._ssh_key_path or settings.text("TRAINVM_SSH_PUBLIC_KEY") or None
        found = configured or next((p for p in SSH_KEY_FILES if Path(p).expanduser().exists()), None)
        return R.ssh_argv(record.ip, found, command)

    def open_ssh_hint(self, record: InstanceRecord) -> str:
        return R.open_ssh_hint(record.name, self.subscription_id)

    def _serial_log(self, n: R.Names) -> str | None:
        try:
            uris = _wire(self._call(lambda: self.api().compute.virtual_machines.retrieve_boot_diagnostics_data(
                n.rg, n.vm, sas_uri_expiration_time_in_minutes=10)))
        except ProviderError:
            return None
        return self._serial_blob(uris)

    def _serial_blob(self, uris: dict[str, Any]) -> str | None:
        """The serial log a retrieveBootDiagnosticsData answer points at (None: none or unreadable)."""
        url = uris.get("serialConsoleLogBlobUri")
        if not url:
            return None
        import requests

        try:  # a SAS URL: no bearer token (storage would reject it)
            resp = requests.get(url, timeout=60, verify=os.environ.get("REQUESTS_CA_BUNDLE") or True)
        except requests.RequestException:
            return None
        return resp.text if resp.status_code == 200 else None

    def _record(self, vm: dict[str, Any], *, notes: builtins.list[str] | None = None, existing: bool = False,
                ip: str | None = None) -> InstanceRecord:
        props, tags, name, rg = _props(vm), vm.get("tags") or {}, vm.get("name") or "", _group_of(vm)
        if ip is None:
            ip = self._ip(rg, name)
        storage = props.get("storageProfile") or {}
        return InstanceRecord(
            name=name, cloud=self.NAME, region=vm.get("location") or "", zone=None,
            instance_type=(props.get("hardwareProfile") or {}).get("vmSize") or "", state=vm_state(props),
            profile=tags.get("trainvm-profile"), hash=tags.get("trainvm-hash"), price_hourly=price_from_labels(tags), **costs_from_labels(tags),
            created=props.get("timeCreated"), last_start=latest_start(props), last_start_is_latest=True, ip=ip or None, image=R.image_urn(storage.get("imageReference")),
            ssh_command=f"ssh {R.ADMIN_USER}@{ip}" if ip else None, ssh_user=R.ADMIN_USER, notes=tuple(notes or ()), adopted=existing,
            spot=props.get("priority") == "Spot", owner=tags.get("trainvm-owner"), cloud_id=vm.get("id"),
            payload=tags.get(PAYLOAD_LABEL))


