"""VM actions of the ARM emulator: runCommand, start/powerOff/deallocate/restart, boot diagnostics and the
serial log they point at. Mixed into arm_state.State.

A power action sets the time of the VM's ProvisioningState/succeeded status to its completion, as Azure
does for any update; the emulator does not model the PowerState/starting, stopping, deallocating statuses
seen while the action runs (the power state changes when the operation completes).

Error codes marked (*) below are the ones seen in real Azure output (public issue reports or the
knowledge file); the others are approximations with the right HTTP status.
"""
from __future__ import annotations

from . import arm_schemas as S
from . import arm_validate as V
from .arm_catalog import COMP, VM_T, now
from .arm_faults import not_found
from .arm_validate import ArmError


class VmActionsMixin:
    """VM actions; mixed into arm_state.State (runs under ArmEmulator's lock)."""

    # ------------------------------------------------------------------ VM actions
    def vm(self, rg, name):
        self.group(rg)
        rec = self.get(rg, VM_T, name)
        if rec is None:
            raise not_found(VM_T, name, rg)
        return rec

    def run_command(self, rg, name, body, polls, method_path):
        return self.run_command_on(self.vm(rg, name), rg, name, body, polls, method_path)

    def run_command_on(self, rec, rg, name, body, polls, method_path):
        """RunShellScript on ``rec`` (a VM, or a scale-set instance shaped like one); output planted under ``name``."""
        body = V.validate(S.RUN_COMMAND_INPUT, body)
        if body["commandId"].lower() not in ("runshellscript", "ifconfig"):
            raise V.invalid("commandId", f"The run command '{body['commandId']}' is not available for Linux "
                            "virtual machines. Use RunShellScript.")
        if rec["state"] != "Succeeded" or rec["extra"].get("power") != "running":
            raise ArmError(409, "OperationNotAllowed", "The operation requires the VM to be running (or set to "
                           "run).")  # (*)
        busy = self.ops.get(rec["extra"].get("run_op"))
        if busy and busy.status == "InProgress":
            raise ArmError(409, "Conflict", "Run command extension execution is in progress. Please wait for "
                           "completion before invoking a run command.")
        script = body.get("script") or []
        self.run_commands.append({"rg": rg, "vm": name, "commandId": body["commandId"], "script": script,
                                  "parameters": body.get("parameters") or []})

        def finish(fail):
            planted = self.run_output.get((rg.lower(), name.lower()), ("", ""))
            out = planted(script) if callable(planted) else planted
            stdout, stderr = (out, "") if isinstance(out, str) else out
            tail = lambda s: s.encode()[-4096:].decode(errors="ignore")  # noqa: E731 (Azure keeps the last 4 KiB)
            return {"value": [{"code": "ProvisioningState/succeeded", "level": "Info",
                               "displayStatus": "Provisioning succeeded",
                               "message": f"Enable succeeded: \n[stdout]\n{tail(stdout)}\n[stderr]\n{tail(stderr)}\n"}]}
        never = bool(self.take_fault("lro", *method_path))
        op = self.new_op(COMP, rec["location"], polls, finish, never)
        rec["extra"]["run_op"] = op.id
        return op

    def power(self, rg, name, action, polls, method_path):
        rec = self.vm(rg, name)
        target = {"start": "running", "poweroff": "stopped", "deallocate": "deallocated", "restart": "running"}
        if rec["state"] != "Succeeded":
            raise ArmError(409, "OperationNotAllowed", f"Operation '{action}' is not allowed on VM '{name}' since "
                           f"the VM is in provisioning state '{rec['state']}'.")
        if action.lower() == "restart" and rec["extra"].get("power") != "running":
            raise ArmError(409, "OperationNotAllowed", "The operation requires the VM to be running (or set to "
                           "run).")

        def finish(fail):
            # a start/powerOff/deallocate/restart is a control-plane update: its completion is the time of the
            # instance view's ProvisioningState/succeeded status (PowerState statuses carry no time), as in Azure
            rec["extra"]["power"], rec["extra"]["end"] = target[action.lower()], now()
        never = bool(self.take_fault("lro", *method_path))
        return self.new_op(COMP, rec["location"], polls, finish, never)

    def boot_diagnostics(self, rg, name, base):
        rec = self.vm(rg, name)
        bd = (rec["body"]["properties"].get("diagnosticsProfile") or {}).get("bootDiagnostics") or {}
        if not bd.get("enabled"):
            raise ArmError(409, "OperationNotAllowed", f"Boot diagnostics is not enabled for virtual machine "
                           f"'{name}'. Enable diagnosticsProfile.bootDiagnostics.")
        url = f"{base}/bootdiagnostics/{rec['guid']}/{name}.%s?sv=2025-01-05&sr=b&sp=r&sig=emulated"
        return {"consoleScreenshotBlobUri": url % "screenshot.bmp",
                "serialConsoleLogBlobUri": url % "serialconsole.log"}

    def serial_log(self, guid):
        rec = next((r for r in self.res.values() if r["type"] == VM_T and r["guid"] == guid), None)
        if rec is None:
            return self.vmss_serial_log(guid)   # a scale-set instance (arm_vmss.py)
        return self.serial_logs.get((rec["rg"], rec["name"].lower()), "")
