"""The VPC firewall rules that make ``ssh_from`` the only source allowed to SSH into a GCE VM.

The bodies come from ``gcp_request.firewall_bodies`` (pure); this module makes the SDK calls through
``GceApi.call`` (bounded retries, classification) and ``GceApi.wait`` (globalOperations.wait, bounded; a finished
operation's ``error.errors`` is always inspected), so the endpoint override (``TRAINVM_GCE_ENDPOINT``) and the
credentials are the provider's. ``SshFirewall`` keeps no state: what one create attempt inserted or reused is
recorded in that attempt's ``FirewallTouched``.

- ``ensure``: each rule is looked up first. Missing: inserted. Present and trainvm's for this VM (the
  description names the VM, the only target tag is the VM's): reused as is when it matches the body
  field by field (``firewall_shape``), else replaced (``firewalls.update``, e.g. another ``--ssh-from``).
  Present and not trainvm's: ConflictError (nothing is touched). Both requests go out before either
  operation is awaited. Every insert/update/delete carries a fresh random requestId, reused only by the
  retries of that one call: a deterministic id would let GCE answer a later run with the finished
  operation of a rule that has been deleted since, and the VM would start without its deny rule.
- ``cleanup`` (a failed create): deletes the rules this attempt inserted, and the ones it reused when no
  VM of that name is left anywhere; never while the VM still exists (its deny rule keeps protecting it).
- ``delete`` (``down``): deletes the VM's rules that are trainvm's; a missing rule is fine.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from provisioner.providers.base import ConflictError, LaunchSpec, ProviderError
from provisioner.providers.gcp import errors as errs
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.request import firewall_bodies, firewall_shape, is_trainvm_rule, ssh_rule_names
from provisioner.providers.gcp.rest_types import FirewallRule

if TYPE_CHECKING:
    from provisioner.providers.gcp.sdk_types import Operation


@dataclass
class FirewallTouched:
    """The rules one create attempt inserted (``created``) and found in place (``reused``)."""

    created: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)


class SshFirewall:
    """The SSH firewall rules of a VM (stateless: one instance serves parallel creates)."""

    def __init__(self, api: GceApi) -> None:
        self.p = api

    # ------------------------------------------------------------------ calls
    def rule(self, name: str) -> FirewallRule | None:
        """The rule as REST JSON (camelCase), or None when there is none of that name."""
        api = self.p.clients()
        fw = self.p.call(lambda: api.firewalls.get(project=api.project, firewall=name, retry=None,
                                                    timeout=self.p.http_timeout), missing=None)
        if fw is None:
            return None
        rule: FirewallRule = json.loads(api.v1.Firewall.to_json(fw))  # the REST JSON of what GCE answered
        return rule

    def _send(self, verb: str, body: FirewallRule) -> Operation | None:
        """insert or update (PUT) ``body``; the Operation, or None when the insert answers 409."""
        api = self.p.clients()
        resource = api.v1.Firewall.from_json(json.dumps(body))  # rejects unknown field names
        rid = str(uuid.uuid4())
        if verb == "insert":
            req = api.v1.InsertFirewallRequest(project=api.project, firewall_resource=resource, request_id=rid)
            return self.p.call(lambda: api.firewalls.insert_unary(request=req, retry=None, timeout=self.p.http_timeout),
                                exists=None)
        req = api.v1.UpdateFirewallRequest(project=api.project, firewall=body["name"], firewall_resource=resource,
                                           request_id=rid)
        updated: Operation = self.p.call(lambda: api.firewalls.update_unary(request=req, retry=None,
                                                                             timeout=self.p.http_timeout))
        return updated

    def _finish(self, ops: list[Operation], deadline: float, *, gone_ok: bool = False) -> None:
        """Wait for every operation; raise the first failure (404 is fine where ``gone_ok``)."""
        failures = []
        for op in ops:
            failure = errs.from_operation(self.p.wait(None, op, deadline))
            if failure and not (gone_ok and failure.status == 404):
                failures.append(failure)
        if failures:
            raise errs.classify(failures[0])

    # ------------------------------------------------------------------ the three uses
    def ensure(self, spec: LaunchSpec, deadline: float, touched: FirewallTouched | None = None) -> None:
        """Make both rules exist exactly as ``firewall_bodies`` says (nothing without ``ssh_from``)."""
        touched = touched if touched is not None else FirewallTouched()
        pending = []
        for body in firewall_bodies(spec, self.p.project):
            name, op = body["name"], None
            rule = self.rule(name)
            if rule is None:
                op = self._send("insert", body)
                if op is not None:
                    touched.created.append(name)
                else:  # 409: created meanwhile (a concurrent `up`, or a retried insert that had gone through)
                    rule = self.rule(name)
                    if rule is None:
                        raise ProviderError(f"firewall rule {name} was reported to exist but is gone", code="409")
            if rule is not None:
                if not is_trainvm_rule(rule, spec.name):
                    raise ConflictError(f"a firewall rule named {name} already exists and was not created by trainvm "
                                        f"for {spec.name}; delete or rename it, or pass --name")
                touched.reused.append(name)
                if firewall_shape(rule) != firewall_shape(body):
                    op = self._send("update", body)
            if op is not None:
                pending.append(op)
        self._finish(pending, deadline)

    def delete(self, vm: str, *, wait: bool, names: list[str] | None = None) -> bool:
        """Delete the VM's rules (all of them, or ``names``) that are trainvm's; True when any was there."""
        api, ops = self.p.clients(), []
        for name in ssh_rule_names(vm) if names is None else names:
            rule = self.rule(name)
            if rule is None or not is_trainvm_rule(rule, vm):
                continue
            req = api.v1.DeleteFirewallRequest(project=api.project, firewall=name, request_id=str(uuid.uuid4()))
            op = self.p.call(partial(api.firewalls.delete_unary, request=req, retry=None, timeout=self.p.http_timeout),
                             missing=None)
            if op is not None:
                ops.append(op)
        if wait:
            self._finish(ops, self.p.deadline(), gone_ok=True)
        return bool(ops)

    def cleanup(self, spec: LaunchSpec, zone: str, touched: FirewallTouched) -> str | None:
        """After a failed create: delete what this attempt left of the VM's rules; a note if that failed."""
        names = list(touched.created)
        if not (names or touched.reused):
            return None
        try:
            if self.p.get(zone, spec.name) is not None:  # the VM stayed (adopted, or its cleanup failed)
                return None
            if touched.reused and self.p.find_any(spec.name)[0] is None:
                names += touched.reused
            if names:
                self.delete(spec.name, wait=True, names=names)
            return None
        except ProviderError as exc:
            return f"deleting firewall rules {', '.join(names)} failed ({exc}); run `trainvm down {spec.name}`"
