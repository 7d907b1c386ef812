"""Azure provider (azure-mgmt-compute / -network / -resource, azure-identity).

Thin on purpose: ``AzureProvider`` composes its parts and delegates (issue 37: no mixins). The API client
(``azure_api.AzureApi``: the SDK clients, the error mapping, the bounded waits) is handed to every other part:
``CreateTransaction`` (azure_create; its compute step azure_compute), ``GroupLease`` (azure_lease),
``AzureImages`` (azure_images), the records and power of a VM (azure_records) and of a scale set (azure_group),
the roles (azure_roles), the preflight (azure_preflight), the payload store (azure_store). Request bodies come
from ``azure_request`` (pure), failures are classified by ``azure_errors``. The SDKs are imported on first use (cloud-sdks.md §5),
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
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner import settings
from provisioner.errors import InputError
from provisioner.providers.azure import group as azure_group
from provisioner.providers.azure import request as R
from provisioner.providers.azure.api import AzureApi, props, wire
from provisioner.providers.azure.clients import Settings
from provisioner.providers.azure.create import CreateTransaction
from provisioner.providers.azure.images import AzureImages
from provisioner.providers.azure.lease import MANAGED, GroupLease, refuse_store_group
from provisioner.providers.azure.power import vm_state
from provisioner.providers.azure.preflight import preflight
from provisioner.providers.azure.records import group_of, power, vm_record
from provisioner.providers.azure.roles import revoke_vm_payload_reader
from provisioner.providers.azure.store import BlobPayloadStore
from provisioner.providers.base import ConflictError, InstanceRecord, LaunchSpec, ProviderError
from provisioner.providers.capabilities import ClusterReader, ImagePinner, Preflighter, PreflightResult
from provisioner.providers.offer import Offer
from provisioner.providers.ssh_key import SSH_KEY_FILES, read_public_key
from provisioner.providers.stack_report import StackReport, last_console_report, read_report

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

    from provisioner.profile.model import Profile
    from provisioner.providers.azure.sdk import MgmtClients

__all__ = ["AzureProvider", "vm_state"]

RUN_COMMAND_TIMEOUT = 300.0


class AzureProvider(ImagePinner, Preflighter, ClusterReader):
    """The Azure cloud: its parts, each on the one API client ``client``."""

    NAME = "azure"

    def __init__(self, *, subscription_id: str | None = None, endpoint: str | None = None,
                 credential: TokenCredential | None = None, poll_seconds: float | None = None, op_timeout: float | None = None,
                 retry_total: int = 6, retry_backoff: float | None = None, ssh_public_key: str | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = Settings.from_env(subscription_id=subscription_id, endpoint=endpoint, poll_seconds=poll_seconds,
                                          op_timeout=op_timeout, retry_total=retry_total, retry_backoff=retry_backoff)
        self.subscription_id = self.settings.subscription_id
        self._ssh_key_path = ssh_public_key
        self.client = AzureApi(self.settings, credential, sleep=sleep, clock=clock)
        self.images = AzureImages(self.client)
        self.lease = GroupLease(self.client)
        self.creator = CreateTransaction(self.client, self.lease, self.images)

    def api(self) -> MgmtClients:
        """The three management clients (built once, on first use: the SDK imports happen here)."""
        return self.client.clients()

    # ------------------------------------------------------------------ building the request
    def ssh_public_key(self) -> str:
        """The admin user's key: $TRAINVM_SSH_PUBLIC_KEY (a path), else ~/.ssh/id_ed25519.pub or id_rsa.pub."""
        configured = self._ssh_key_path or settings.text("TRAINVM_SSH_PUBLIC_KEY") or None
        key = read_public_key(configured)
        if key is not None:
            return key
        raise InputError("no SSH public key found for the Azure VM's admin user (password login stays disabled)",
                         hint="create one with `ssh-keygen -t ed25519`, or set TRAINVM_SSH_PUBLIC_KEY to a .pub file")

    def pin_image(self, os_name: str) -> dict[str, str]:
        return self.images.pin(os_name)

    def image_for(self, spec: LaunchSpec, offer: Offer) -> R.ImageRef:
        return self.images.image_for(spec, offer)

    # ------------------------------------------------------------------ the contract
    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        if offer.cloud != self.NAME:
            raise ProviderError(f"not an Azure offer: {offer.describe(spec.spot)}", code="NotAzure")
        key = self.ssh_public_key()  # input problems surface before any cloud call
        R.custom_data(spec)
        R.user_data(spec)
        return self.creator.run(spec, offer, key)  # azure_create: one transaction for 1..N nodes

    def find(self, name: str) -> InstanceRecord | None:
        n = R.names(name)
        vm = self.client.get_vm(n.rg, name)
        if vm is None:
            return azure_group.find(self.client, name)  # a cluster's rank-0 node, or None
        if (vm.get("tags") or {}).get(MANAGED) != "true":
            return None
        return vm_record(self.client, vm)

    def cluster_nodes(self, name: str) -> builtins.list[InstanceRecord]:
        return azure_group.cluster_nodes(self.client, name)

    def read_cluster_reports(self, name: str) -> dict[str, StackReport | None]:
        return azure_group.read_cluster_reports(self.client, name)

    def list(self) -> builtins.list[InstanceRecord]:
        api, clients = self.client, self.client.clients()
        vms = [wire(v) for v in api.call(lambda: list(clients.compute.virtual_machines.list_all(status_only="true")))]
        vms = [v for v in vms if (v.get("tags") or {}).get(MANAGED) == "true"]
        ips: dict[str, str] = {}
        if vms:
            for pip in api.call(lambda: [wire(p) for p in clients.network.public_ip_addresses.list_all()]):
                if props(pip).get("ipAddress"):
                    ips[(pip.get("id") or "").lower()] = props(pip)["ipAddress"]
        out = []
        for vm in vms:
            pip_id = R.resource_id(self.subscription_id, group_of(vm), f"{R.NET}/publicIPAddresses", R.names(vm["name"]).pip)
            out.append(vm_record(api, vm, ip=ips.get(pip_id.lower(), "")))
        out.extend(azure_group.list_nodes(api))  # one record per cluster node
        return sorted(out, key=lambda r: (r.name, r.region))

    def delete(self, name: str, *, wait: bool = True) -> bool:
        rg = R.names(name).rg
        group = self.client.get_group(rg)
        if group is None:
            return False
        refuse_store_group(group, rg)
        if (group.get("tags") or {}).get(MANAGED) != "true":
            raise ConflictError(f"resource group {rg} is not managed by trainvm (no {MANAGED}=true tag); not deleting it")
        revoke_vm_payload_reader(self.client, name, rg)
        return self.client.delete_group(rg, wait=wait)

    def preflight(self, profile: Profile, name: str, regions: builtins.list[str]) -> PreflightResult:
        """Before ``up`` creates anything: may this caller make the role assignments (or is the user-assigned
        identity usable)? azure_preflight; AuthError names the choices when not."""
        return preflight(self.client, profile, name, regions)

    def payload_store(self) -> BlobPayloadStore:
        """The payload store on Blob Storage (providers/azure/store.py), on this provider's subscription."""
        return BlobPayloadStore(self.client)

    def stop(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return power(self.client, name, "stop", wait=wait) or azure_group.power(self.client, name, "stop", wait=wait)

    def start(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return power(self.client, name, "start", wait=wait) or azure_group.power(self.client, name, "start", wait=wait)

    def read_report(self, name: str) -> tuple[StackReport | None, dict[str, object] | None]:
        n = R.names(name)
        vm = self.client.get_vm(n.rg, name, expand="userData")
        if vm is None:
            return azure_group.read_report(self.client, name)  # a cluster: rank 0's report
        if (vm.get("tags") or {}).get(MANAGED) != "true":
            return None, None
        profile = R.decode_user_data(props(vm).get("userData"))
        return self._run_command_report(n) or self._serial_report(n), profile

    def _run_command_report(self, n: R.Names) -> StackReport | None:
        api = self.client
        cmd = {"commandId": "RunShellScript", "script": list(R.REPORT_SCRIPT)}
        deadline = api.clock() + min(api.op_timeout, RUN_COMMAND_TIMEOUT)
        try:
            poller = api.call(lambda: api.clients().compute.virtual_machines.begin_run_command(n.rg, n.vm, cmd))
            result = wire(api.wait(poller, deadline, f"run command on {n.vm}"))
        except ProviderError:  # not running, agent not ready, busy...: the serial log may still have it
            return None
        message = "".join((s.get("message") or "") for s in result.get("value") or [])
        return read_report(R.run_command_stdout(message), f"the stack report of {n.vm} (Run Command)")

    def _serial_report(self, n: R.Names) -> StackReport | None:
        return last_console_report(self._serial_log(n), f"{n.vm}'s boot diagnostics log")

    def live_status(self, record: InstanceRecord) -> str | None:
        return None  # no channel besides the console (CloudSpec.live_status)

    def console(self, name: str, start: int = 0) -> tuple[str, int] | None:
        """The boot-diagnostics serial log from character ``start`` (Azure refreshes the blob every
        few minutes, so it lags the VM); None when there is no such trainvm VM."""
        n = R.names(name)
        vm = self.client.get_vm(n.rg, name)
        if vm is None:
            return azure_group.console(self.client, name, start)  # a cluster: rank 0's serial log
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
        api = self.client
        try:
            uris = wire(api.call(lambda: api.clients().compute.virtual_machines.retrieve_boot_diagnostics_data(
                n.rg, n.vm, sas_uri_expiration_time_in_minutes=10)))
        except ProviderError:
            return None
        return api.serial_blob(uris)
