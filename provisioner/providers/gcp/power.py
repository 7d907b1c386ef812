"""``trainvm stop`` / ``trainvm start`` on Compute Engine (instances.stop / instances.start), one instance at a
time: the provider applies it to every member of a name (one VM, or each node of a group, in parallel).

stop: the instance goes TERMINATED: vCPU/GPU/RAM billing ends; the boot disk (and its data) stays and
bills; the ephemeral external IP is released (start gives a new one); Local SSD data is discarded
(``discardLocalSsd=true``: GCE refuses to stop a VM with Local SSD otherwise, except on the few machine
types that can preserve it; the startup script re-stages data on the next boot). start: the instance boots
again and GCE runs its ``startup-script`` on every boot, so the script re-verifies the stack (phase
markers: nothing is reinstalled) and re-stages local data.

A stop of a VM that is still STOPPING (an earlier ``stop --no-wait``, or a stop from the console) sends nothing:
GCE would answer ``resourceNotReady``. With ``wait`` it polls the instance until that stop ends (the provider's
poll interval, within TRAINVM_GCE_OP_TIMEOUT), without it it answers the STOPPING record ("already stopping").
A start of a VM that is STOPPING (or whose start meets a stop begun since it was read: resourceNotReady) first
waits for that stop to end the same way, with or without ``wait`` (the start cannot be sent before), then starts
it; a stop that does not end in time is a named OPERATION_TIMEOUT and no start is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from provisioner.providers.base import ConflictError, InstanceRecord, InvalidRequestError, RetryExhaustedError
from provisioner.providers.gcp import errors as errs
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.poll import poll

if TYPE_CHECKING:
    from provisioner.providers.gcp.sdk_types import Instance, Operation

STOPPING = "STOPPING"


def power(gce: GceApi, inst: Instance, action: str, record: Callable[[Instance], InstanceRecord], *,
          wait: bool = True) -> InstanceRecord | None:
    """Stop or start the instance ``inst`` (one VM, or one node of a group: the provider calls this for every member
    of a name); the record after it (None when it vanished meanwhile)."""
    name, zone = inst.name, inst.zone.rsplit("/", 1)[-1]
    if dict(inst.labels).get("trainvm-managed") != "true":
        raise ConflictError(f"{name} in {zone} is not managed by trainvm (no trainvm-managed label); not touching it")
    api = gce.clients()
    if action == "stop":
        if inst.status == STOPPING:
            return _record_of(record, _stopped(gce, zone, inst) if wait else inst)
        req = api.v1.StopInstanceRequest(project=api.project, zone=zone, instance=name, discard_local_ssd=True)
        try:
            op = gce.call(lambda: api.instances.stop_unary(request=req, retry=None, timeout=gce.http_timeout))
        except InvalidRequestError as exc:  # a stop that began since it was read: resourceNotReady
            now = gce.get(zone, name) if exc.code == "resourceNotReady" else None
            if now is None or now.status != STOPPING:
                raise
            return _record_of(record, _stopped(gce, zone, now) if wait else now)
    else:
        if inst.status == STOPPING:  # GCE refuses a start until the stop has ended (resourceNotReady)
            ended = _stopped(gce, zone, inst)
            if ended is None:
                return None
            inst = ended
        try:
            op = _send_start(gce, zone, name)
        except InvalidRequestError as exc:  # a stop that began since it was read: wait for it, then start once more
            if exc.code != "resourceNotReady":
                raise
            now = gce.get(zone, name)
            if now is not None and now.status == STOPPING:
                now = _stopped(gce, zone, now)
            if now is None:
                return None
            op = _send_start(gce, zone, name)
    if wait:
        failure = errs.from_operation(gce.wait(zone, op, gce.deadline()))
        if failure:
            raise errs.classify(failure)
    return record(gce.get(zone, name) or inst)


def _send_start(gce: GceApi, zone: str, name: str) -> Operation:
    api = gce.clients()
    op: Operation = gce.call(lambda: api.instances.start_unary(project=api.project, zone=zone, instance=name, retry=None,
                                                               timeout=gce.http_timeout))
    return op


def _record_of(record: Callable[[Instance], InstanceRecord], inst: Instance | None) -> InstanceRecord | None:
    return None if inst is None else record(inst)


def _stopped(gce: GceApi, zone: str, inst: Instance) -> Instance | None:
    """The instance once the stop in progress has ended (it leaves STOPPING), polled at the provider's interval
    within the operation timeout; None when it vanished meanwhile (deleted)."""
    name = inst.name

    def timed_out(last: object) -> RetryExhaustedError:
        return RetryExhaustedError(f"{name} in {zone} was still {getattr(last, 'status', STOPPING)} after "
                                   f"{gce.op_timeout:g} s (TRAINVM_GCE_OP_TIMEOUT): an earlier stop has not ended",
                                   code="OPERATION_TIMEOUT")

    got = poll(lambda: gce.get(zone, name), ready=lambda i: i is None or i.status != STOPPING, deadline=gce.deadline(),
               timed_out=timed_out, interval=gce.poll_interval, clock=gce.clock, sleep=gce.sleep)
    return got
