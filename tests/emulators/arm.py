"""Loopback Azure Resource Manager emulator over https, for tests that drive the real azure-mgmt-* SDKs.

    with ArmEmulator() as emu:                       # https://127.0.0.1:PORT, cert from a trustme CA
        rc, nc, cc = emu.clients()                   # Resource/Network/ComputeManagementClient, wired to it
        emu.inject("allocation_failed_lro", location="eastus", size="Standard_NC4as_T4_v3")
        ...
        assert emu.resources_in("trainvm-x") == []

Client settings it needs (emu.client_kwargs() returns them): base_url=emu.url, connection_verify=emu.ca_path
(or REQUESTS_CA_BUNDLE=emu.ca_path), a bearer-token credential, polling_interval=0 (ARM polls every 30 s
otherwise: Retry-After: 0 counts as absent), credential_scopes=["https://management.azure.com/.default"].

Modelled: resource groups (PUT/GET/HEAD/PATCH/DELETE with a 202 + Location LRO that deletes everything in the
group, list with $filter on tags), generic resource lists, Microsoft.Network virtualNetworks (+subnets GET),
networkSecurityGroups, publicIPAddresses, networkInterfaces (each also listed subscription-wide), Microsoft.Compute
virtualMachines (PUT, GET with $expand=instanceView or $expand=userData, DELETE, lists by group/subscription
(statusOnly=true adds the instance view)/location, instanceView, runCommand, start/powerOff/
deallocate/restart, retrieveBootDiagnosticsData + the SAS blob it points at), disks (created with a VM),
platform image versions (list/get), provider register, virtualMachineScaleSets (Uniform) and
proximityPlacementGroups with the scale sets' instances, NICs, public IPs, runCommand and power actions
(arm_vmss.py: what is and is not modelled), system-assigned VM identities and
Microsoft.Authorization/roleAssignments at resource-group scope (arm_roles.py: what is and is not modelled). LROs: Azure-AsyncOperation (default) or provisioningState
in the body (lro_style="body"); deletes answer 202 + Location (+ Azure-AsyncOperation for resources).
Validation: arm_validate.py (schemas: arm_schemas.py, semantic checks: arm_checks.py). State and references:
arm_state.py (PUT: arm_put.py, GET rendering: arm_render.py, VM actions: arm_vm_actions.py, LROs: arm_lro.py).
Faults and error texts: arm_faults.py. Resource types, regions, images: arm_catalog.py. HTTP routing: arm_http.py.

What the SDK raises for each fault (observed, tests/azure/test_emulator.py; classify by e.error.code, never by
class or status):
    sku_not_available_409     ResourceExistsError   409  SkuNotAvailable         (from begin_create_or_update)
    quota                     ResourceExistsError   409  OperationNotAllowed     (from begin_create_or_update)
    allocation_failed_lro     HttpResponseError     200  AllocationFailed        (from .result(); the VM stays, Failed)
    zonal_allocation_failed_lro / overconstrained_allocation_lro: same, ZonalAllocationFailed /
                              OverconstrainedAllocationRequest
    throttle_429, unavailable_503   retried by RetryPolicy; when persistent HttpResponseError 429
                              SubscriptionRequestsThrottled / 503 ServiceUnavailable
    auth_401                  ClientAuthenticationError 401 InvalidAuthenticationToken (no retry)
    invalid_400               HttpResponseError 400 InvalidParameter
    lro_never_done            poller.done() stays False; poller.result(timeout=t) returns the status body, no error
With lro_style="body" a failed create raises HttpResponseError 200 with e.error None: read the instance view.
"""
from __future__ import annotations

import re
import shutil
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass, field

from .arm_catalog import VM_T
from .arm_faults import KINDS, Fault
from .arm_http import ArmRouter, Handler
from .arm_state import State
from .arm_validate import ArmError
from .tls_server import TlsThreadingHTTPServer

DEFAULT_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
DEFAULT_TOKEN = "fake-arm-token"


@dataclass
class Recorded:
    """One request as the emulator saw it (and the status it answered)."""
    method: str
    path: str
    query: dict
    body: object
    headers: dict
    status: int = 0
    namespace: str = ""
    ignored: list = field(default_factory=list)   # read-only body members the emulator dropped

    @property
    def api_version(self):
        return self.query.get("api-version")


class StaticTokenCredential:
    """A TokenCredential that never touches the network (azure-core calls get_token_info when present)."""

    def __init__(self, token=DEFAULT_TOKEN):
        self.token, self.calls, self.scopes = token, 0, []

    def get_token(self, *scopes, claims=None, tenant_id=None, enable_cae=False, **kw):
        from azure.core.credentials import AccessToken
        self.calls += 1
        self.scopes.append(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)

    def get_token_info(self, *scopes, options=None):
        from azure.core.credentials import AccessTokenInfo
        self.calls += 1
        self.scopes.append(scopes)
        return AccessTokenInfo(self.token, int(time.time()) + 3600, token_type="Bearer")

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


class ArmEmulator(ArmRouter):
    """ARM on https://127.0.0.1:PORT. polls = InProgress answers before an LRO finishes; lro_style = "async"
    (Azure-AsyncOperation header) or "body" (provisioningState polling on the resource URL); page_size =
    items per list page (nextLink beyond); token = the only bearer token accepted (None: any)."""

    def __init__(self, subscription_id=DEFAULT_SUBSCRIPTION, *, polls=1, lro_style="async", page_size=100,
                 token=None, ca=None):
        assert lro_style in ("async", "body")
        self.subscription_id, self.polls, self.lro_style = subscription_id, polls, lro_style
        self.page_size, self.token, self._ca = page_size, token, ca
        self.Recorded = Recorded
        self.requests: list[Recorded] = []
        self.state = State(subscription_id)
        self._lock = threading.RLock()
        self._httpd = self._thread = self._tmp = None
        self.url = self.ca_path = None
        self.silent = None  # (path regex, seconds): matching requests are held that long before the answer
        self.on_poll = None  # on_poll(emu, op): test hook run (under the lock) before an LRO poll advances it
        self.before_request = None  # before_request(method, path, body): test hook run (outside the lock) before routing
        self.after_request = None  # after_request(method, path, body, status): test hook run (outside the lock) after it

    # ------------------------------------------------------------------ lifecycle
    def start(self):
        from tests.emulators.azurite_server import shared_ca

        ca = self._ca or shared_ca()  # one CA per process by default: the shared Azurite's certificate comes from it
        self._tmp = tempfile.mkdtemp(prefix="arm-emulator-")
        self.ca_path = f"{self._tmp}/ca.pem"
        ca.cert_pem.write_to_path(self.ca_path)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1", "localhost").configure_cert(ctx)
        # the TLS handshake happens in the request's own thread, not in accept(): a client that connects and never
        # handshakes (a process interrupted mid-connect) otherwise blocks the serving thread in do_handshake forever,
        # and stop() with it (seen as a hung CI run); a refused handshake is recorded, not printed (tls_server.py)
        self._httpd = TlsThreadingHTTPServer(("127.0.0.1", 0), Handler, ctx)
        self._httpd.daemon_threads = True
        self._httpd.emu = self
        self.url = f"https://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="arm-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(5)
            self._httpd = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def reset(self):
        """Forget every resource, operation, fault, planted output and recorded request."""
        with self._lock:
            self.state = State(self.subscription_id)
            self.requests.clear()
            self.on_poll = self.silent = self.before_request = self.after_request = None

    # ------------------------------------------------------------------ test controls
    def inject(self, kind, location=None, times=1, size=None, *, zone=None, code=None, message=None,
               method=None, path=None, created=None):
        """Queue a fault. VM kinds (sku_not_available_409, quota, allocation_failed_lro,
        zonal_allocation_failed_lro, overconstrained_allocation_lro, lro_never_done) fire on a matching VM PUT;
        HTTP kinds (throttle_429, unavailable_503, auth_401, invalid_400) on the next request matching `method`
        / `path` (a regex), or on a matching VM PUT when location/size/zone is given. lro_never_done with
        method/path applies to any LRO-starting request. times=None: forever. code/message override the text
        (e.g. allocation_failed_lro with code="ZonalAllocationFailed"). Scale sets (arm_vmss.py):
        partial_capacity_lro with created=K allocates K instances, then fails AllocationFailed."""
        with self._lock:
            f = Fault(kind, location, times, size, zone, code, message, method, path, created)
            self.state.faults.append(f)
            return f

    def set_run_command_output(self, rg, vm, stdout="", stderr=""):
        """What RunShellScript prints on this VM: strings, or stdout=callable(script_lines) -> str | (out, err)."""
        with self._lock:
            self.state.run_output[(rg.lower(), vm.lower())] = stdout if callable(stdout) else (stdout, stderr)

    def set_serial_log(self, rg, vm, text):
        with self._lock:
            self.state.serial_logs[(rg.lower(), vm.lower())] = text

    def set_power_state(self, rg, vm, power):
        """'running' | 'stopped' | 'deallocated' (e.g. the in-VM idle watchdog powered it off)."""
        with self._lock:
            self.state.vm(rg, vm)["extra"]["power"] = power

    def evict(self, rg, vm):
        """Spot eviction: evictionPolicy Delete removes the VM (and what has deleteOption Delete); else deallocates."""
        with self._lock:
            rec = self.state.vm(rg, vm)
            if (rec["body"]["properties"].get("evictionPolicy") or "").lower() == "delete":
                self.state.remove(rec)
            else:
                rec["extra"]["power"] = "deallocated"

    def add_image(self, publisher, offer, sku, versions, generation="V2", os_version=""):
        with self._lock:
            self.state.images[(publisher, offer, sku)] = (generation, list(versions), os_version)

    def deleting_group(self, rg, location, tags=None):
        """A resource group whose deletion is still running (an earlier attempt's cleanup, a `trainvm down` that did
        not wait): GET answers provisioningState Deleting and a PUT of the group or into it 409
        ResourceGroupBeingDeleted, as ARM does, until finish_operations(stuck=True) ends the deletion."""
        with self._lock:
            self.state.put_group(rg, {"location": location, "tags": dict(tags or {})})
            op = self.state.delete_group(rg, self.polls, ("DELETE", ""))
            op.never = True
            return op

    def caller(self, *roles):
        """The caller's role assignments: ("Contributor",) or ("Contributor", "/subscriptions/S/resourceGroups/RG"),
        ...; a role without a scope is held on the subscription (arm_permissions.py)."""
        with self._lock:
            self.state.caller_roles = [(r, f"/subscriptions/{self.subscription_id}") if isinstance(r, str) else tuple(r)
                                       for r in roles]

    def add_identity(self, rg, name, location="eastus"):
        """A user-assigned identity an administrator created (its group too): the resource as ARM returns it."""
        with self._lock:
            if self.state.group(rg, required=False) is None:
                self.state.put_group(rg, {"location": location})
            return self.state.identity("PUT", rg, name, {"location": location})[1]

    def deny(self, scope, actions=("Microsoft.Authorization/roleAssignments/write",), name="trainvm-test-deny"):
        """A deny assignment Azure made (a managed application's, a deployment stack's deny settings): ``actions`` are
        refused at and under ``scope`` whatever the caller's roles say (arm_permissions.py). Its id, as ARM's."""
        import uuid as _uuid

        with self._lock:
            guid = str(_uuid.uuid4())
            self.state.deny_assignments.append({"name": name, "scope": scope, "actions": list(actions),
                                                "id": f"{scope}/providers/Microsoft.Authorization/denyAssignments/{guid}"})

    def grant(self, principal_id, role, scope=None):
        """An administrator's role assignment of a built-in ``role`` to ``principal_id`` at ``scope`` (default the
        subscription), made outside trainvm (no caller check)."""
        import uuid as _uuid

        from .arm_permissions import AUTHZ, ROLE_DEFINITIONS
        with self._lock:
            scope = scope or f"/subscriptions/{self.subscription_id}"
            name = str(_uuid.uuid4())
            rid = f"{scope}/providers/{AUTHZ}/roleAssignments/{name}"
            self.state.role_assignments[rid.lower()] = {
                "id": rid, "name": name, "scope": scope, "principalId": principal_id, "principalType": "ServicePrincipal",
                "roleDefinitionId": f"/subscriptions/{self.subscription_id}/providers/{AUTHZ}/roleDefinitions/"
                                    f"{ROLE_DEFINITIONS[role][0]}", "description": "granted by an administrator"}

    def finish_operations(self, stuck=False):
        """Run every in-flight LRO to its end now; stuck=True also releases lro_never_done ones (do that before
        a test ends: a poller left on a never-ending LRO keeps polling in its thread)."""
        with self._lock:
            for op in list(self.state.ops.values()):
                op.polls, op.never = 0, op.never and not stuck
                op.advance()

    # ------------------------------------------------------------------ inspection
    def resources_in(self, rg):
        with self._lock:
            return self.state.resources_in(rg)

    def resource_groups(self):
        with self._lock:
            return self.state.resource_groups()

    def vm_groups(self):
        """The resource groups but the payload stores' (``trainvm-payload-REGION``, kept by `down` by design: one per
        subscription and region, shared by every VM there; docs/vm.md "The payload")."""
        return [g for g in self.resource_groups() if not g.lower().startswith("trainvm-payload-")]

    def resource(self, rid):
        """The resource as GET would return it (None when absent)."""
        with self._lock:
            rec = self.state.by_id(rid)
            return None if rec is None else self.state.render(rec, "instanceView" if rec["type"] == VM_T else "")

    def pending_operations(self):
        with self._lock:
            return [op for op in self.state.ops.values() if op.status == "InProgress"]

    @property
    def run_commands(self):
        return self.state.run_commands

    @property
    def faults(self):
        return self.state.faults

    def calls(self, method=None, path=None):
        """Recorded requests, filtered by method and a path regex."""
        return [r for r in self.requests if (method is None or r.method == method.upper())
                and (path is None or re.search(path, r.path, re.I))]

    def api_versions(self):
        """{namespace: {api-version, ...}} as sent by the clients."""
        out = {}
        for r in self.requests:
            if r.api_version and r.namespace:
                out.setdefault(r.namespace, set()).add(r.api_version)
        return out

    # ------------------------------------------------------------------ SDK wiring
    def client_kwargs(self, **overrides):
        kw = dict(credential=StaticTokenCredential(self.token or DEFAULT_TOKEN), subscription_id=self.subscription_id,
                  base_url=self.url, connection_verify=self.ca_path, polling_interval=0,
                  credential_scopes=["https://management.azure.com/.default"],
                  retry_total=2, retry_backoff_factor=0.01, retry_backoff_max=0.05)
        kw.update(overrides)
        return kw

    def clients(self, **overrides):
        """(ResourceManagementClient, NetworkManagementClient, ComputeManagementClient) pointed at the emulator."""
        from azure.mgmt.compute import ComputeManagementClient
        from azure.mgmt.network import NetworkManagementClient
        from azure.mgmt.resource.resources import ResourceManagementClient  # trap A6: not azure.mgmt.resource
        kw = self.client_kwargs(**overrides)
        return ResourceManagementClient(**kw), NetworkManagementClient(**kw), ComputeManagementClient(**kw)

    def env(self):
        """Environment for the trainvm CLI (see SPEC.md Environment)."""
        return {"TRAINVM_AZURE_ENDPOINT": self.url, "REQUESTS_CA_BUNDLE": self.ca_path,
                "AZURE_SUBSCRIPTION_ID": self.subscription_id,
                "TRAINVM_AZURE_ACCESS_TOKEN": self.token or DEFAULT_TOKEN}

try:  # a ready-made fixture: import arm_emulator from tests.emulators.arm in a test module (mark the import noqa F401)
    import pytest

    @pytest.fixture
    def arm_emulator():
        with ArmEmulator() as emu:
            yield emu
except ImportError:  # pragma: no cover
    pass

__all__ = ["ArmEmulator", "ArmError", "Recorded", "StaticTokenCredential", "KINDS", "DEFAULT_SUBSCRIPTION",
           "DEFAULT_TOKEN"]
