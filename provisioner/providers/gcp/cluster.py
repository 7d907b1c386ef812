"""Clusters on Compute Engine (``LaunchSpec.nodes`` > 1): the provider contract's cluster half (providers/base.py)
on top of the group engine (``gcp_group.GceGroup``: compact policy, one bulkInsert with count = minCount = N, the
node list in every node's metadata).

- ``create``: an existing cluster of that name and hash is adopted (all N nodes) or refused (another hash; an
  incomplete one: ``trainvm down NAME`` first); a single VM called NAME is a ConflictError. Then the SSH rules
  (``ssh_from``, as for one VM, targeting the cluster's SSH tag) and the intra-cluster rule (all TCP/UDP/ICMP
  between the nodes' tag) are made to exist, then the group. On any failure the engine has deleted the nodes and
  the policy; this module deletes the rules this attempt made and checks that no node and no policy is left
  before it calls the cleanup "verified".
- Nodes are found by the label ``trainvm-cluster = NAME`` (one aggregatedList); their rank is the name's suffix.
- ``delete``: every node, then the policy, then the rules; ``stop`` / ``start`` / reports: every node on at most
  ``gcp_group.PARALLEL`` threads.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from provisioner.catalog.models import Offer
from provisioner.providers.base import AttemptInProgressError, ConflictError, InstanceRecord, LaunchSpec, ProviderError
from provisioner.providers.gcp import errors as errs
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.cluster_request import (
    CLUSTER_LABEL,
    cluster_of,
    internal_rule_body,
    internal_rule_name,
    is_internal_rule,
    node_body,
)
from provisioner.providers.gcp.firewall import FirewallTouched, SshFirewall
from provisioner.providers.gcp.group import PARALLEL, GceGroup, GroupClients, node_names, policy_name
from provisioner.providers.gcp.report import guest_report, serial_report
from provisioner.providers.gcp.request import ssh_notes, ssh_rule_names
from provisioner.verify.report import StackReport


def _zone(inst: Any) -> str:
    return str(inst.zone).rsplit("/", 1)[-1]


def _each(fn: Callable[[Any], Any], items: builtins.list[Any]) -> builtins.list[Any]:
    """``fn`` over ``items`` on at most PARALLEL threads; the first error is raised after all have finished."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(items)))) as pool:
        futures = [pool.submit(fn, item) for item in items]
    return [f.result() for f in futures]


class GceClusters:
    """What ``GcpProvider`` does for clusters; stateless per call (one instance serves parallel creates)."""

    def __init__(self, gce: GceApi, fw: SshFirewall, record: Callable[..., InstanceRecord], op_timeout: float) -> None:
        self.gce, self.fw, self.record, self.op_timeout = gce, fw, record, op_timeout

    def group(self) -> GceGroup:
        api = self.gce.clients()
        return GceGroup(GroupClients(api.instances, api.zone_ops, api.policies, api.region_ops), api.project,
                        op_timeout=self.op_timeout, poll=max(0.05, self.gce.poll_interval))

    # ------------------------------------------------------------------ reading
    def nodes(self, name: str) -> builtins.list[Any]:
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

    # ------------------------------------------------------------------ create
    def create(self, spec: LaunchSpec, offer: Offer, image: str) -> InstanceRecord:
        zone = str(offer.zone)
        existing = self.nodes(spec.name)
        if existing:
            return self._adopt(existing, spec)
        single, _ = self.gce.find_any(spec.name)
        if single is not None:
            raise ConflictError(f"a VM named {spec.name} already exists in {_zone(single)}; a cluster of that name cannot "
                                "be created beside it", hint=f"run `trainvm down {spec.name}` or pass --name")
        body = node_body(spec, offer, image, self.gce.project)
        self.gce.clients().v1.Instance.from_json(json.dumps(body))  # a body that does not parse creates nothing
        touched = FirewallTouched()
        deadline = self.gce.deadline()
        try:
            if spec.ssh_from:
                self.fw.ensure(spec, deadline, touched)
            self._ensure_internal_rule(spec, deadline, touched)
            made = self.group().create(spec.name, zone, body, spec.nodes, compact=spec.compact)
        except ProviderError as exc:
            if exc.code in ("alreadyExists", "409"):  # bulkInsert refused: instances of the nodes' names exist
                refused = str(exc)
                self._after_failure(spec, zone, touched, exc)
                theirs = [i for i in self.nodes(spec.name) if dict(i.labels).get("trainvm-hash") == spec.labels.get("trainvm-hash")]
                if theirs:  # another `up` of this cluster won the race: failover would make a second cluster
                    raise AttemptInProgressError(
                        f"another `trainvm up` is creating cluster {spec.name} in {_zone(theirs[0])} ({len(theirs)} of its "
                        f"{spec.nodes} nodes exist; GCE refused this one's bulkInsert: {refused})",
                        name=spec.name, where=_zone(theirs[0])) from exc
                raise ConflictError(f"instances named like the nodes of {spec.name} already exist in {zone} ({exc}); "
                                    "another `trainvm up` of this cluster may be creating it, or they are not trainvm's",
                                    hint=f"run `trainvm up` again to adopt the cluster once it is complete, `trainvm down "
                                         f"{spec.name}` to delete it, or pass --name") from exc
            self._after_failure(spec, zone, touched, exc)
            raise
        return self.record(made[0], notes=ssh_notes(spec))

    def _adopt(self, nodes: builtins.list[Any], spec: LaunchSpec) -> InstanceRecord:
        first = nodes[0]
        labels = dict(first.labels)
        if labels.get("trainvm-hash") != spec.labels.get("trainvm-hash"):
            raise ConflictError(f"a cluster named {spec.name} already exists in {_zone(first)} for another version of the "
                                f"profile (hash {labels.get('trainvm-hash')}); run `trainvm down {spec.name}` or pass --name")
        if len(nodes) != spec.nodes or cluster_of(first.name, labels)[1] != 0:
            raise ConflictError(f"cluster {spec.name} in {_zone(first)} has {len(nodes)} of its {spec.nodes} nodes "
                                "(an interrupted create or delete)", hint=f"run `trainvm down {spec.name}`, then `trainvm up` again")
        return self.record(first, existing=True)

    def _ensure_internal_rule(self, spec: LaunchSpec, deadline: float, touched: FirewallTouched) -> None:
        body = internal_rule_body(spec, self.gce.project)
        rule = self.fw.rule(body["name"])
        if rule is not None:
            if not is_internal_rule(rule, spec.name):
                raise ConflictError(f"a firewall rule named {body['name']} already exists and was not created by trainvm "
                                    f"for cluster {spec.name}; delete or rename it, or pass --name")
            touched.reused.append(body["name"])
            return
        op = self.fw._send("insert", body)
        if op is not None:
            touched.created.append(body["name"])
            self.fw._finish([op], deadline)

    def _after_failure(self, spec: LaunchSpec, zone: str, touched: FirewallTouched, exc: ProviderError) -> None:
        """The engine deleted the nodes and the policy (or tried): delete this attempt's rules, then check."""
        left: builtins.list[str] = []
        try:
            nodes = self.nodes(spec.name)
            left += [f"{i.name} ({_zone(i)})" for i in nodes]
            if self._policy_exists(spec.name, zone):
                left.append(f"placement policy {policy_name(spec.name)}")
            if not nodes:
                names = touched.created + touched.reused
                if names:
                    self._delete_rules(spec.name, names)
        except ProviderError as cleanup:
            exc.args = (f"{exc}; cleaning up cluster {spec.name} failed ({cleanup}); run `trainvm down {spec.name}`",)
            exc.leaves(f"cluster {spec.name} ({zone})")
            return
        if left:
            exc.args = (f"{exc}; left after the cleanup: {', '.join(left)}; run `trainvm down {spec.name}`",)
            exc.leaves(*left)
        else:
            exc.verified()

    def _policy_exists(self, cluster: str, zone: str) -> bool:
        api = self.gce.clients()
        region = zone.rsplit("-", 1)[0]
        got = self.gce.call(lambda: api.policies.get(project=api.project, region=region, resource_policy=policy_name(cluster),
                                                     retry=None, timeout=self.gce.http_timeout), missing=None)
        return got is not None

    def _delete_rules(self, cluster: str, names: builtins.list[str]) -> bool:
        """The cluster's SSH rules (``SshFirewall``) and its internal rule, where they are trainvm's."""
        ssh = [n for n in names if n != internal_rule_name(cluster)]
        gone = self.fw.delete(cluster, wait=True, names=ssh) if ssh else False
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

    # ------------------------------------------------------------------ delete / power
    def delete(self, name: str) -> tuple[bool, int]:
        """Every node, the placement policy and the rules of cluster ``name``: (anything was there, nodes deleted)."""
        nodes = self.nodes(name)
        for zone in sorted({_zone(i) for i in nodes}):
            count = max(cluster_of(i.name, dict(i.labels))[2] for i in nodes)
            self.group().delete(name, zone, count, compact=True)
        rules = self._delete_rules(name, [*ssh_rule_names(name), internal_rule_name(name)])
        left = self.nodes(name)
        if left:
            raise ProviderError(f"{len(left)} node(s) of cluster {name} are still there after their deletion; "
                                f"run `trainvm down {name}` again", code="CLUSTER_LEFT")
        return bool(nodes) or rules, len(nodes)

    def power(self, name: str, action: str) -> InstanceRecord | None:
        """Stop or start every node of cluster ``name``; its rank-0 record after it (None: no such cluster)."""
        nodes = self.nodes(name)
        if not nodes:
            return None
        api = self.gce.clients()

        def one(inst: Any) -> Any:
            zone = _zone(inst)
            if action == "stop":
                req = api.v1.StopInstanceRequest(project=api.project, zone=zone, instance=inst.name, discard_local_ssd=True)
                op = self.gce.call(lambda: api.instances.stop_unary(request=req, retry=None, timeout=self.gce.http_timeout))
            else:
                op = self.gce.call(lambda: api.instances.start_unary(project=api.project, zone=zone, instance=inst.name,
                                                                     retry=None, timeout=self.gce.http_timeout))
            failure = errs.from_operation(self.gce.wait(zone, op, self.gce.deadline()))
            if failure:
                raise errs.classify(failure)
            return self.gce.get(zone, inst.name) or inst

        return self.record(_each(one, nodes)[0])

    @staticmethod
    def names(cluster: str, nodes: int) -> builtins.list[str]:
        return node_names(cluster, nodes)
