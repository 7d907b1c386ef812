"""What a name stands for on Compute Engine, for 1..N members (issue 26: a single VM is a group of one), and
what ``status`` / ``down`` / ``stop`` / ``start`` / reports do with them (the create transaction is gcp_create).

- ``members``: the VM called NAME (a group of one; also one made before groups existed, which carries no cluster
  label), else the nodes labelled ``trainvm-cluster = NAME`` (one aggregatedList), in rank order.
- ``delete``: every member (in parallel), then the placement policy they reference, then the firewall rules whose
  tags they carry (the VM's SSH rules, the internal rule between a group's nodes); ``stop`` / ``start`` /
  reports: every member on at most ``gcp_group.PARALLEL`` threads.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from provisioner.providers.base import InstanceRecord, ProviderError
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.cluster_request import cluster_of, cluster_tag, internal_rule_name, is_internal_rule
from provisioner.providers.gcp.firewall import SshFirewall
from provisioner.providers.gcp.group import CLUSTER_LABEL, PARALLEL, GceGroup, GroupClients, policy_name
from provisioner.providers.gcp.power import power
from provisioner.providers.gcp.report import guest_report, serial_report
from provisioner.providers.gcp.request import ssh_rule_names, ssh_tag
from provisioner.providers.stack_report import StackReport

if TYPE_CHECKING:
    from provisioner.providers.gcp.sdk_types import Instance

T = TypeVar("T")
U = TypeVar("U")


def _zone(inst: Instance) -> str:
    return str(inst.zone).rsplit("/", 1)[-1]


def _each(fn: Callable[[T], U], items: builtins.list[T]) -> builtins.list[U]:
    """``fn`` over ``items`` on at most PARALLEL threads; the first error is raised after all have finished."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(items)))) as pool:
        futures = [pool.submit(fn, item) for item in items]
    return [f.result() for f in futures]


class GceClusters:
    """What ``GcpProvider`` does for clusters; stateless per call (one instance serves parallel creates)."""

    def __init__(self, gce: GceApi, fw: SshFirewall, record: Callable[[Instance], InstanceRecord], op_timeout: float) -> None:
        self.gce, self.fw, self.record, self.op_timeout = gce, fw, record, op_timeout

    def group(self) -> GceGroup:
        api = self.gce.clients()
        return GceGroup(GroupClients(api.instances, api.zone_ops, api.policies, api.region_ops), api.project,
                        api=self.gce, op_timeout=self.op_timeout, poll=max(0.05, self.gce.poll_interval))

    # ------------------------------------------------------------------ reading
    def nodes(self, name: str) -> builtins.list[Instance]:
        """The instances of cluster ``name`` (trainvm-managed, labelled with it), in rank order."""
        listing = self.gce.aggregated(f'labels.{CLUSTER_LABEL} = "{name}"')
        found = [i for i in listing.instances if dict(i.labels).get("trainvm-managed") == "true"]
        return sorted(found, key=lambda i: (cluster_of(i.name, dict(i.labels))[1] is None,
                                            cluster_of(i.name, dict(i.labels))[1] or 0, i.name))

    def records(self, name: str) -> builtins.list[InstanceRecord]:
        return [self.record(i) for i in self.nodes(name)]

    def reports(self, name: str) -> dict[str, StackReport | None]:
        nodes = self.nodes(name)
        got = _each(lambda i: guest_report(self.gce, _zone(i), i.name) or serial_report(self.gce, _zone(i), i.name), nodes)
        return {i.name: r for i, r in zip(nodes, got, strict=True)}

    def _delete_rules(self, cluster: str, names: builtins.list[str], *, wait: bool = True) -> bool:
        """The SSH rules (``SshFirewall``) and the internal rule of ``cluster`` (or VM), where they are trainvm's."""
        ssh = [n for n in names if n != internal_rule_name(cluster)]
        gone = self.fw.delete(cluster, wait=wait, names=ssh) if ssh else False
        if internal_rule_name(cluster) in names:
            rule = self.fw.rule(internal_rule_name(cluster))
            if rule is not None and is_internal_rule(rule, cluster):
                api = self.gce.clients()
                req = api.v1.DeleteFirewallRequest(project=api.project, firewall=internal_rule_name(cluster))
                op = self.gce.call(lambda: api.firewalls.delete_unary(request=req, retry=None, timeout=self.gce.http_timeout),
                                   missing=None)
                if op is not None:
                    self.fw._finish([op], self.gce.deadline(), gone_ok=True)
                    gone = True
        return gone

    # ------------------------------------------------------------------ delete / power: one path for 1..N
    def members(self, name: str) -> tuple[builtins.list[Instance], builtins.list[str]]:
        """What ``name`` stands for: the VM called ``name`` (a group of one: also one made before groups existed,
        without the cluster labels; trainvm's or not, the caller checks), else the nodes labelled
        ``trainvm-cluster = name`` in rank order; and the zones GCE could not list."""
        inst, unreachable = self.gce.find_any(name)
        if inst is not None:
            return [inst], unreachable
        return self.nodes(name), unreachable

    def delete(self, name: str, members: builtins.list[Instance], *, wait: bool = True, rules: bool = True) -> bool:
        """Every member (in parallel), then the placement policy they use, then the firewall rules they carry the
        tags of (after the members are gone, so the SSH deny rule protects them to the end; with ``wait=False`` and
        no policy, while they shut down). No member: leftover rules only. True when anything was there."""
        policies = {str(p).rsplit("/regions/", 1)[-1] for i in members for p in i.resource_policies
                    if str(p).rsplit("/", 1)[-1] == policy_name(name)}
        wait = wait or bool(policies)  # a policy in use by an instance cannot be deleted
        _each(lambda i: self.gce.delete_instance(_zone(i), i.name, wait=wait), members)
        for where in sorted(policies):  # "REGION/resourcePolicies/NAME"
            self._delete_policy(where.split("/", 1)[0], name)
        tags = {t for i in members for t in i.tags.items}
        names = [*ssh_rule_names(name)] if rules and (not members or ssh_tag(name) in tags) else []
        if rules and (not members or cluster_tag(name) in tags):
            names.append(internal_rule_name(name))
        gone = self._delete_rules(name, names, wait=wait) if names else False
        if wait and members:
            left = [i for i in members if self.gce.get(_zone(i), i.name) is not None]
            if left:
                raise ProviderError(f"{len(left)} instance(s) of {name} are still there after their deletion; "
                                    f"run `trainvm down {name}` again", code="CLUSTER_LEFT")
        return bool(members) or gone

    def _delete_policy(self, region: str, cluster: str) -> None:
        api = self.gce.clients()
        op = self.gce.call(lambda: api.policies.delete_unary(project=api.project, region=region,
                                                             resource_policy=policy_name(cluster), retry=None,
                                                             timeout=self.gce.http_timeout), missing=None)
        if op is not None:  # a regional operation: the group engine's wait
            group = self.group()
            group._raise_op(group._wait(op, region=region))

    def power(self, members: builtins.list[Instance], action: str, *, wait: bool = True) -> InstanceRecord | None:
        """Stop or start every member (``gcp_power.power`` each, on at most PARALLEL threads); the first one's
        record after it (None: no member)."""
        got = _each(lambda i: power(self.gce, i, action, self.record, wait=wait), members)
        return got[0] if got else None
