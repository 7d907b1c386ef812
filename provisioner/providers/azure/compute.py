"""The compute step of the one Azure create transaction (providers/azure/create.py): the only part that differs
between one node (a virtual machine) and N nodes (a Uniform scale set of capacity N).

Why a group of one is a plain VM and not a scale set of capacity 1 (issue 26):
- cost: a scale set itself is free ("Scale sets incur no additional charges above the VM instances deployed
  within them", directionsonmicrosoft.com "Understanding Azure Virtual Machine Scale Sets"; Microsoft's scale-set
  overview on learn.microsoft.com says the same), so money does not decide; everything else does;
- what the user sees: a Uniform instance is a ``NAME_0`` child of a ``virtualMachineScaleSets`` resource, not a
  VM called NAME in the portal's Virtual machines blade, and ``az vm`` commands do not address it (``az vmss``);
  single VMs made by every earlier trainvm release are ``virtualMachines/NAME``: down/stop/start/status must
  keep finding them, so both shapes would have to be read forever anyway;
- Run Command (``read_report``) and boot diagnostics (``console``) are per-instance APIs on a scale set
  (``virtualMachineScaleSets/N/virtualMachines/K/runCommand``, ``.../retrieveBootDiagnosticsData``; REST reference
  "Virtual Machine Scale Set VMs", learn.microsoft.com/rest/api/compute/virtual-machine-scale-set-vms, and
  group.py's readers use them): they exist, but are a second code path for the same report;
- Spot eviction (Deallocate/Delete), managed identity (system-assigned on the scale set: every instance shares
  it), OS and data disks (a Uniform instance's disks go with the instance) behave alike, so neither forces (a);
- a Uniform set of 1 adds nothing one VM lacks (no placement group or InfiniBand partition is needed for one node).
So (b): one transaction (lease -> network -> compute -> read back -> tags -> roles -> adopt/join/cleanup) whose
compute step is ``Vm`` for one node and ``ScaleSet`` for N. Each knows its resource's GET, PUT, "complete" test,
read-back (a scale set: N Succeeded instances, then the node list in its tags) and record.
"""

from __future__ import annotations

from provisioner.providers.azure import errors as errs
from provisioner.providers.azure import group_request as G
from provisioner.providers.azure import request as R
from provisioner.providers.azure.api import AzureApi, Poller, wire
from provisioner.providers.azure.arm import Arm
from provisioner.providers.azure.group import _instances, node_records, write_node_list
from provisioner.providers.azure.lease import _props
from provisioner.providers.azure.records import vm_record
from provisioner.providers.base import CapacityError, InstanceRecord, LaunchSpec, ProviderError
from provisioner.providers.cluster_env import parse_node_list
from provisioner.providers.offer import Offer

IN_FLIGHT = ("Creating", "Updating")


class Vm:
    kind, what = "VM", "VM"

    def get(self, api: AzureApi, name: str) -> Arm | None:
        return api.get_vm(R.names(name).rg, name)

    def complete(self, res: Arm, spec: LaunchSpec) -> bool:
        return _props(res).get("provisioningState") == "Succeeded"

    def put(self, api: AzureApi, spec: LaunchSpec, offer: Offer, body_extra: dict[str, str], image: R.ImageRef,
            key: str, deadline: float) -> Poller:
        body = R.vm_body(spec, offer, subscription_id=api.subscription_id, image=image, ssh_public_key=key)
        body["tags"] = {**body["tags"], **body_extra}
        n = R.names(spec.name)
        return api.call(lambda: api.clients().compute.virtual_machines.begin_create_or_update(n.rg, spec.name, body))

    def wait(self, api: AzureApi, poller: Poller, spec: LaunchSpec, deadline: float) -> None:
        """A failure without a code (provisioningState polling) takes the code from the instance view."""
        n = R.names(spec.name)
        try:
            api.wait(poller, deadline, f"virtual machine {n.vm}")
        except ProviderError as exc:
            if exc.code not in (None, "200"):
                raise
            view = api.call(lambda: api.clients().compute.virtual_machines.instance_view(n.rg, n.vm), missing=None)
            code, message = errs.code_from_statuses(wire(view).get("statuses"))
            if code is None:
                raise
            raise errs.classify(errs.Failure(200, code, message)) from exc

    def finish(self, api: AzureApi, spec: LaunchSpec, res: Arm, deadline: float) -> Arm | None:
        return res

    def record(self, api: AzureApi, res: Arm, notes: list[str], existing: bool) -> InstanceRecord:
        return vm_record(api, res, notes=notes, existing=existing)


class ScaleSet:
    kind, what = "scale set", "cluster"

    def get(self, api: AzureApi, name: str) -> Arm | None:
        return api.get_scale_set(name)

    def complete(self, res: Arm, spec: LaunchSpec) -> bool:
        """Succeeded and carrying the node list of all N nodes (the read-back's last write before the roles)."""
        return (_props(res).get("provisioningState") == "Succeeded"
                and len(parse_node_list(res.get("tags") or {})) == spec.nodes)

    def put(self, api: AzureApi, spec: LaunchSpec, offer: Offer, body_extra: dict[str, str], image: R.ImageRef,
            key: str, deadline: float) -> Poller:
        clients, n = api.clients(), R.names(spec.name)
        placement = None
        if spec.compact:
            api.call(lambda: clients.compute.proximity_placement_groups.create_or_update(
                n.rg, G.ppg_name(spec.name), G.ppg_body(spec, offer.region)))
            placement = G.ppg_id(api.subscription_id, spec.name)
        body = G.scale_set_body(spec, offer, subscription_id=api.subscription_id, image=image, ssh_public_key=key,
                                placement_group=placement)
        body["tags"] = {**body["tags"], **body_extra}
        return api.call(lambda: clients.compute.virtual_machine_scale_sets.begin_create_or_update(n.rg, spec.name, body))

    def wait(self, api: AzureApi, poller: Poller, spec: LaunchSpec, deadline: float) -> None:
        try:
            api.wait(poller, deadline, f"scale set {spec.name}")
        except ProviderError as exc:
            raise _failed_put(api, spec, exc) from exc

    def finish(self, api: AzureApi, spec: LaunchSpec, res: Arm, deadline: float) -> Arm | None:
        """All or nothing: exactly N Succeeded instances (a scale set has no minimum count), then the node list."""
        instances = _instances(api, R.names(spec.name).rg, spec.name)
        ok = [i for i in instances if _props(i).get("provisioningState") == "Succeeded"]
        if len(ok) != spec.nodes:
            raise CapacityError(f"scale set {spec.name} holds {len(ok)} of {spec.nodes} nodes in {res.get('location')}",
                                code=PARTIAL_CODE)
        if not self.complete(res, spec):
            write_node_list(api, spec.name, instances, deadline)
        return api.get_scale_set(spec.name)

    def record(self, api: AzureApi, res: Arm, notes: list[str], existing: bool) -> InstanceRecord:
        return node_records(api, res, notes=notes, existing=existing)[0]


PARTIAL_CODE = "PartialScaleSet"


def compute_for(spec: LaunchSpec) -> Vm | ScaleSet:
    return ScaleSet() if spec.nodes > 1 else Vm()


def other_kind(c: Vm | ScaleSet) -> Vm | ScaleSet:
    return Vm() if isinstance(c, ScaleSet) else ScaleSet()


def _failed_put(api: AzureApi, spec: LaunchSpec, exc: ProviderError) -> ProviderError:
    """The scale set's PUT failed: count what was allocated anyway (the group's deletion removes it), and take
    the failure's code from a failed instance when the operation carried none (provisioningState polling)."""
    try:
        instances = _instances(api, R.names(spec.name).rg, spec.name)
    except ProviderError:
        instances = []
    made = sum(1 for i in instances if _props(i).get("provisioningState") == "Succeeded")
    out = exc
    if exc.code in (None, "200"):
        for inst in instances:
            code, message = errs.code_from_statuses((_props(inst).get("instanceView") or {}).get("statuses"))
            if code is not None:
                out = errs.classify(errs.Failure(200, code, message))
                break
    out.args = (f"{out}; {made} of {spec.nodes} nodes had been allocated",)
    return out
