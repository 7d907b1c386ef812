"""The ARM emulator's scale-set and proximity-placement-group routes (mixed into arm_http.ArmRouter); the state
behind them and what is and is not modelled: arm_vmss.py."""
from __future__ import annotations

from .arm_catalog import PPG_T, VMSS_T
from .arm_validate import ArmError


class VmssRoutes:
    """The scale-set and PPG routes of ArmRouter._resource (None: the generic resource routes apply)."""

    def _vmss_route(self, method, rg, type_, rest, q, body, rec, api, mp):
        st = self.state
        if type_ == PPG_T and len(rest) == 2 and method == "PUT" and isinstance(body, dict):
            status, res, op, rec.ignored = st.put(type_, rg, rest[1], body, 0, mp)
            op.advance()   # synchronous: the SDK's create_or_update is not an LRO
            return status, {}, st.render(res)
        if type_ == PPG_T and len(rest) == 2 and method == "DELETE":
            res = st.get(rg, type_, rest[1])
            if res is not None and st.ppg_users(res["id"]):
                raise ArmError(409, "OperationNotAllowed", f"Proximity placement group {rest[1]} cannot be deleted "
                               f"while it is in use by {', '.join(st.ppg_users(res['id']))}.")
            if res is not None:
                st.remove(res)
            return (200 if res is not None else 204), {}, None
        if type_ != VMSS_T or len(rest) < 2:
            return None
        name = rest[1]
        sub = [s.lower() for s in rest[2:]]
        if not sub and method == "PATCH":   # 200 with the resource as it is now, then the operation
            op = st.patch_vmss(rg, name, body, self.polls, mp)
            return 200, {"Azure-AsyncOperation": self._op_url(op, api), "Retry-After": "0"}, st.render(st.vmss(rg, name))
        if sub == ["virtualmachines"] and method == "GET":
            r = st.vmss(rg, name)
            insts = sorted(r["extra"].get("instances", {}).values(), key=lambda i: int(i["id"]))
            return self._page([st.render_instance(r, i, q.get("$expand", "")) for i in insts], q, mp[1])
        if len(sub) == 2 and sub[0] == "virtualmachines" and method == "GET":
            r, inst = st.vmss_instance(rg, name, rest[3])
            return 200, {}, st.render_instance(r, inst, q.get("$expand", ""))
        if len(sub) == 3 and sub[0] == "virtualmachines" and sub[2] == "instanceview" and method == "GET":
            r, inst = st.vmss_instance(rg, name, rest[3])
            return 200, {}, st.instance_view_of(r, inst)
        if len(sub) == 3 and sub[0] == "virtualmachines" and sub[2] == "runcommand" and method == "POST":
            return 202, self._lro_headers(st.vmss_run_command(rg, name, rest[3], body or {}, self.polls, mp), api), None
        if len(sub) == 3 and sub[0] == "virtualmachines" and sub[2] == "retrievebootdiagnosticsdata" and method == "POST":
            return 200, {}, st.vmss_boot_diagnostics(rg, name, rest[3], self.url)
        if sub == ["networkinterfaces"] and method == "GET":
            return self._page(st.render_vmss_nics(st.vmss(rg, name)), q, mp[1])
        if sub == ["publicipaddresses"] and method == "GET":
            return self._page(st.render_vmss_pips(st.vmss(rg, name)), q, mp[1])
        if len(sub) == 1 and sub[0] in ("deallocate", "start", "poweroff") and method == "POST":
            return 202, self._lro_headers(st.vmss_power(rg, name, sub[0], body, self.polls, mp), api), None
        return None
