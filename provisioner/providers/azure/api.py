"""The Azure API client part of ``AzureProvider`` (issue 37, one style per cloud): the SDK's management clients on
one credential, the SDK error mapping (``azure_errors``) and the bounded waits. Every other part (create, lease,
group, power, roles, preflight, store, quota, bake) receives this object in its constructor or as its first
argument; none reaches back into the provider.

What the SDK returns is untyped (azure-mgmt-* models): ``wire`` reads a model as its ARM JSON, typed as
``azure_arm.Arm`` (the fields trainvm reads); the clients and ``Poller`` (the two methods of an ``LROPoller`` trainvm
calls) are the Protocols of ``azure_sdk``, naming the operations trainvm calls.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast, overload

from provisioner.providers.azure import errors as errs
from provisioner.providers.azure import request as R
from provisioner.providers.azure.arm import Arm, Props
from provisioner.providers.azure.clients import (
    Settings,
    default_credential,
    make_authorization_client,
    make_clients,
    make_storage_client,
)
from provisioner.providers.azure.sdk import Authorization, MgmtClients, Storage
from provisioner.providers.azure.sdk import Poller as Poller  # re-exported: the parts name it from here
from provisioner.providers.base import RetryExhaustedError

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

T = TypeVar("T")
M = TypeVar("M")

NOT_MISSING = frozenset({"SubscriptionNotFound", "InvalidSubscriptionId"})  # 404s that are not "no such resource"


def wire(obj: object) -> Arm:
    """A hybrid SDK model (or a plain dict) as its ARM JSON: the typed adapter (``azure_arm.Arm`` declares the
    fields read; the SDK's own types stop here)."""
    if obj is None:
        return {}
    as_dict = getattr(obj, "as_dict", None)
    return cast(Arm, dict(as_dict()) if as_dict is not None else dict(obj))  # type: ignore[call-overload]


def props(res: Arm | None) -> Props:
    """A resource's ``properties`` (empty when it has none)."""
    return ((res or {}).get("properties")) or {}


class AzureApi:
    """The management clients (built once, on first use: the SDK imports happen there), the calls and the waits."""

    def __init__(self, settings: Settings, credential: TokenCredential | None = None, *,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.subscription_id, self.poll_seconds = settings.subscription_id, settings.poll_seconds
        self.op_timeout = settings.op_timeout
        self.sleep, self.clock = sleep, clock
        self._credential = credential
        self._clients: MgmtClients | None = None

    def clients(self) -> MgmtClients:
        """``.resource`` / ``.network`` / ``.compute``, sharing one credential."""
        if self._clients is None:
            self._credential = self._credential or default_credential()
            self._clients = make_clients(self.settings, self._credential)
        return self._clients

    @property
    def credential(self) -> TokenCredential:
        """The credential every client uses (settled on first use)."""
        self.clients()
        assert self._credential is not None  # clients() settled it
        return self._credential

    def authorization(self) -> Authorization:
        """azure-mgmt-authorization's client (role assignments), made when a VM needs one."""
        return make_authorization_client(self.settings, self.credential)

    def storage(self) -> Storage:
        """azure-mgmt-storage's client (the payload store's account, container, keys and lifecycle policy)."""
        return make_storage_client(self.settings, self.credential)

    # ------------------------------------------------------------------ calls and waiting
    @overload
    def call(self, fn: Callable[[], T]) -> T: ...

    @overload
    def call(self, fn: Callable[[], T], *, missing: M) -> T | M: ...

    def call(self, fn: Callable[[], T], **kw: object) -> object:
        """One SDK call (azure-core retries throttling/5xx itself); 404 -> ``missing`` when given."""
        try:
            return fn()
        except Exception as exc:
            if not errs.is_sdk_error(exc):
                raise
            f = errs.from_exception(exc)
            if f.status == 404 and "missing" in kw and f.code not in NOT_MISSING:
                return kw["missing"]
            raise errs.classify(f) from exc

    def wait(self, poller: Poller, deadline: float, what: str) -> object:
        """The poller's result within the deadline; RetryExhaustedError when it is still running."""
        result = self.call(lambda: poller.result(timeout=max(0.0, deadline - self.clock())))
        if not poller.done():
            raise RetryExhaustedError(f"{what} did not finish within {self.op_timeout:g} s (TRAINVM_AZURE_OP_TIMEOUT)",
                                      code="OperationTimeout")
        return result

    # ------------------------------------------------------------------ reads
    def get_vm(self, rg: str, name: str, expand: str | None = "instanceView") -> Arm | None:
        vm = self.call(lambda: self.clients().compute.virtual_machines.get(rg, name, expand=expand), missing=None)
        return None if vm is None else wire(vm)

    def get_scale_set(self, name: str, expand: str | None = None) -> Arm | None:
        rg = R.names(name).rg
        vmss = self.call(lambda: self.clients().compute.virtual_machine_scale_sets.get(rg, name, expand=expand),
                         missing=None)
        return None if vmss is None else wire(vmss)

    def get_group(self, rg: str) -> Arm | None:
        g = self.call(lambda: self.clients().resource.resource_groups.get(rg), missing=None)
        return None if g is None else wire(g)

    def ip(self, rg: str, name: str) -> str | None:
        pip = self.call(lambda: self.clients().network.public_ip_addresses.get(rg, R.names(name).pip), missing=None)
        return props(wire(pip)).get("ipAddress") if pip is not None else None

    def delete_group(self, rg: str, *, wait: bool) -> bool:
        """Delete resource group ``rg`` (and wait for it); False when there was none."""
        poller = self.call(lambda: self.clients().resource.resource_groups.begin_delete(rg), missing=None)
        if poller is None:
            return False
        if wait:
            self.wait(poller, self.clock() + self.op_timeout, f"deleting resource group {rg}")
        return True

    def serial_blob(self, uris: Arm) -> str | None:
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
