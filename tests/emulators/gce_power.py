"""instances.stop / instances.start for the GCE emulator (tests/emulators/gce.py; issue 10: trainvm stop/start).
Mixed into GceEmulator; each handler runs under the emulator's lock.

Modelled: stop moves RUNNING (or STAGING/PROVISIONING) to STOPPING, and to TERMINATED when its operation is
DONE; the ephemeral external address is released (accessConfigs lose natIP), lastStopTimestamp is set. Stopping
a TERMINATED instance is a DONE no-op operation. An instance with Local SSD (SCRATCH disks) can only be stopped
with discardLocalSsd=true (the emulator does not model preserving Local SSD data, a feature limited to some
machine types): otherwise 400. start moves TERMINATED to STAGING, and to RUNNING with a new ephemeral address
and lastStartTimestamp when DONE; starting a RUNNING instance is a no-op; stopping or starting an instance
that is STOPPING/SUSPENDING -> 400 resourceNotReady. Not modelled: suspend/resume, the guest running its
startup-script again (tests/render runs the script itself), billing.
"""
from __future__ import annotations

from .gce_resources import now
from .gce_validate import ApiError, invalid


class PowerMethodsMixin:
    def _not_ready(self, project, zone, instance):
        return ApiError(400, "resourceNotReady", f"The resource 'projects/{project}/zones/{zone}/instances/{instance}' "
                                                 "is not ready")

    def _instances_stop(self, req, project, zone, instance):
        if (dup := self._request_id(req, project)) is not None:
            return dup
        key = self._lookup(project, zone, instance)
        inst = self.instances[key]
        if inst["status"] in ("STOPPING", "SUSPENDING"):
            raise self._not_ready(project, zone, instance)
        scratch = any(d.get("type") == "SCRATCH" for d in inst.get("disks") or [])
        if scratch and req.query.get("discardLocalSsd") != "true":
            raise invalid(f"Instance '{instance}' has Local SSD disks: stopping it needs discardLocalSsd=true "
                          "(preserving Local SSD data on stop is not supported for this machine type).")
        if inst["status"] != "TERMINATED":
            inst["status"] = "STOPPING"
        return self._remember(req, project, self._new_op(project, zone, "stop", instance, inst["id"]))

    def _instances_start(self, req, project, zone, instance):
        if (dup := self._request_id(req, project)) is not None:
            return dup
        key = self._lookup(project, zone, instance)
        inst = self.instances[key]
        if inst["status"] in ("STOPPING", "SUSPENDING"):
            raise self._not_ready(project, zone, instance)
        if inst["status"] == "TERMINATED":
            inst["status"] = "STAGING"
        return self._remember(req, project, self._new_op(project, zone, "start", instance, inst["id"]))

    def _finish_power(self, op_type, target):
        inst = self.instances.get(target)
        if inst is None:
            return
        if op_type == "stop" and inst["status"] != "TERMINATED":
            inst.update(status="TERMINATED", lastStopTimestamp=now())
            for nic in inst["networkInterfaces"]:
                for ac in nic.get("accessConfigs", []):
                    ac.pop("natIP", None)
        elif op_type == "start" and inst["status"] != "RUNNING":
            inst.update(status="RUNNING", lastStartTimestamp=now())
            for nic in inst["networkInterfaces"]:
                for ac in nic.get("accessConfigs", []):
                    ac["natIP"] = f"198.51.100.{self._rng.randrange(2, 254)}"
