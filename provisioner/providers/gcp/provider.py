"""Google Compute Engine provider (google-cloud-compute, REST transport).

Thin on purpose: the request body comes from ``gcp_request`` (pure), failures are classified by
``gcp_errors``; this module makes the SDK calls. ``compute_v1`` is imported on first use, so that
``get_provider("gcp")`` stays cheap until a cloud call is made (cloud-sdks.md G5).

- Credentials: ``google.auth.default()`` and ``GOOGLE_CLOUD_PROJECT`` (``gcp_auth``; no metadata-server ping off GCE). ``TRAINVM_GCE_ENDPOINT`` sends
  every client (the zone- and global-operations clients included) to another base URL with anonymous
  credentials (no token leaves for a non-Google endpoint); the project then defaults to ``trainvm-test``.
- SDK calls, waits and listings go through ``gcp_api.GceApi`` (shared with ``gcp_firewall``, ``gcp_report``
  and ``gcp_power``); every wait and retry is ``poll.poll`` (tenacity). ``zoneOperations.wait``
  (``globalOperations.wait`` for firewall rules; a server long-poll of at most ~2 min) runs until the deadline
  ``TRAINVM_GCE_OP_TIMEOUT`` seconds (default 600). A finished operation's ``error.errors`` is always
  inspected: ``ExtendedOperation.result()`` is never used (G1, G2).
- Stateless per call: what one ``create`` has done (an insert sent, firewall rules made or reused) lives in its
  ``CreateAttempt``, never on the provider, so one provider serves creates in parallel threads.
- Retries: 429, 5xx (not stock-outs) and connection errors are retried up to
  ``tries`` times with exponential backoff and jitter (base ``TRAINVM_RETRY_BASE_DELAY`` seconds, default 1),
  within ``TRAINVM_API_TIMEOUT`` seconds for the whole call (default 30; each HTTP request gets at most half of
  it), then RetryExhaustedError: an endpoint that never answers fails in about that time.
- Wrong project: a 404 on the project itself ("The resource 'projects/P' was not found"; GCE says that for a
  project that does not exist or that the credentials cannot see) is an AuthError naming the project, never
  "not found" for the VM; a 403 is an AuthError as well.
- Listing: ``aggregatedList``; when one unreachable zone fails it (there is no ``returnPartialSuccess`` on it in
  compute v1), zone by zone, skipping the unreachable zone with a warning (``gcp_api``). ``delete`` never says
  "already gone" while a zone could not be read.
- Idempotency: ``create`` first looks for the VM in the offer's zone (same hash: returned as is, with
  ``adopted``, once it has left PROVISIONING/STAGING; still there at the deadline: AttemptInProgressError, the
  VM is left to the `up` creating it and failover stops; another hash or not trainvm's: ConflictError). Every insert carries a requestId
  derived from name + profile hash + the offer (zone, machine type, GPU model and count), so a re-run of an
  interrupted ``up`` gets GCE's original
  operation back instead of a second VM. A replayed operation that is stale (it was already DONE when
  returned and failed, or its VM has been deleted since) is detected and the insert re-sent with a new id
  derived from the old operation. An insert *this* call started whose VM is gone when it finishes (or is
  STOPPING/TERMINATED) was deleted by someone else (``trainvm down`` during ``up``): VanishedError, never a
  re-send.
- SSH: with ``ssh_from`` two VPC firewall rules (``gcp_firewall``) are made to exist before the instance
  insert, so the VM is never reachable through default-allow-ssh; ``down`` deletes them after the VM.
- Failure: after any failed attempt (operation error, timeout, retries exhausted) the VM, if it exists
  and carries this profile's hash, is deleted and the deletion awaited, then looked up again: the error's
  ``cleanup`` is "verified" only when GCE answered that the VM is gone, else the VM is recorded in
  ``left_behind`` (``provision`` then stops: the next attempt would reuse the name). Then the firewall rules
  the attempt created (never while the VM still exists).
  An interrupted process (Ctrl-C) leaves the VM to the re-run, which adopts it.
"""

from __future__ import annotations

import builtins
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from provisioner import settings
from provisioner.catalog.models import Offer
from provisioner.errors import CredentialsError
from provisioner.providers.base import (
    AttemptInProgressError,
    ConflictError,
    InstanceRecord,
    InvalidRequestError,
    LaunchSpec,
    ProviderError,
    RetryExhaustedError,
    VanishedError,
    costs_from_labels,
    price_from_labels,
    refuse_foreign,
)
from provisioner.providers.capabilities import ClusterReader, ImagePinner
from provisioner.providers.gcp import errors as errs
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.auth import default_credentials
from provisioner.providers.gcp.cluster import GceClusters
from provisioner.providers.gcp.cluster_request import cluster_of
from provisioner.providers.gcp.firewall import FirewallTouched, SshFirewall
from provisioner.providers.gcp.report import guest_report, guest_status, serial_report, serial_text
from provisioner.providers.gcp.request import (
    image_family,
    instance_body,
    open_ssh_hint,
    request_id,
    ssh_argv,
    ssh_notes,
    ssh_tag,
)
from provisioner.providers.gcp.store import GcsPayloadStore
from provisioner.providers.poll import poll
from provisioner.providers.store import PAYLOAD_LABEL
from provisioner.settings import env_seconds
from provisioner.verify.report import StackReport

MANAGED_FILTER = "labels.trainvm-managed = true"
IN_FLIGHT = ("PROVISIONING", "STAGING")


@dataclass
class CreateAttempt:
    """What one ``create`` call has done so far (a failure cleans up exactly that): never kept on the provider,
    so that one provider serves creates in parallel threads."""

    spec: LaunchSpec
    zone: str
    deadline: float
    sent: bool = False  # an insert went out: a failure must look for the VM and delete it
    rules: FirewallTouched = field(default_factory=FirewallTouched)


class GcpProvider(ImagePinner, ClusterReader):
    NAME = "gcp"

    def __init__(self, *, project: str | None = None, endpoint: str | None = None, credentials: Any = None,
                 op_timeout: float | None = None, retry_base_delay: float | None = None, tries: int = 4,
                 poll_interval: float | None = None, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None, call_timeout: float | None = None,
                 warn: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.endpoint = (endpoint if endpoint is not None else settings.text("TRAINVM_GCE_ENDPOINT")).rstrip("/")
        self._project, self._credentials = project, credentials
        op_timeout = op_timeout if op_timeout is not None else env_seconds("TRAINVM_GCE_OP_TIMEOUT", 600.0)
        retry_base_delay = retry_base_delay if retry_base_delay is not None else env_seconds("TRAINVM_RETRY_BASE_DELAY", 1.0)
        # Credentials are checked now (google.auth only, ~0.1 s), so that a cloud without them is skipped
        # when the provider is built; compute_v1 (~1 s to import) waits for the first API call.
        self._credentials, self.project = self._auth()
        self.gce = GceApi(
            project=self.project, credentials=self._credentials, endpoint=self.endpoint, op_timeout=op_timeout,
            retry_base_delay=retry_base_delay,
            poll_interval=poll_interval if poll_interval is not None else min(2.0, 2 * retry_base_delay), tries=tries,
            call_timeout=call_timeout if call_timeout is not None else env_seconds("TRAINVM_API_TIMEOUT", 30.0),
            warn=warn, sleep=sleep, clock=clock, rng=rng)
        self.op_timeout = op_timeout
        self._images: dict[str, str] = {}  # a cache of facts, not per-call state
        self._fw = SshFirewall(self.gce)
        self._clusters = GceClusters(self.gce, self._fw, self._record, op_timeout)

    def api(self) -> SimpleNamespace:
        """The compute_v1 module, project and clients (built once, on first use)."""
        return self.gce.clients()

    def _auth(self) -> tuple[Any, str]:
        project = self._project or os.environ.get("GOOGLE_CLOUD_PROJECT") or None
        if self.endpoint:
            from google.auth.credentials import AnonymousCredentials

            return self._credentials or AnonymousCredentials(), project or "trainvm-test"
        if self._credentials is None:
            return default_credentials(project)  # gcp_auth: no metadata-server ping off GCE
        if not project:
            raise CredentialsError("no Google Cloud project is set",
                                      hint="export GOOGLE_CLOUD_PROJECT=<project id> (or `gcloud config set project`)")
        return self._credentials, project

    # ------------------------------------------------------------------ building the request
    def resolve_image(self, os_name: str) -> str:
        """The pinned image (``projects/P/global/images/NAME``) the OS's family points to now (cached)."""
        if os_name not in self._images:
            api, (project, family) = self.api(), image_family(os_name)
            image = self.gce.call(lambda: api.images.get_from_family(project=project, family=family, retry=None,
                                                                     timeout=self.gce.http_timeout), missing=None)
            if image is None:
                raise InvalidRequestError(f"image family {project}/{family} for {os_name} was not found", code="IMAGE")
            self._images[os_name] = f"projects/{project}/global/images/{image.name}"
        return self._images[os_name]

    def pin_image(self, os_name: str) -> dict[str, str]:
        """What ``trainvm lock`` records: the image the family points to now."""
        return {"image": self.resolve_image(os_name)}

    def image_for(self, spec: LaunchSpec) -> str:
        """A baked image ``up`` chose (``spec.boot_image``), else NAME.lock's pinned image, else the family's current one."""
        return spec.boot_image or spec.locked_images.get(self.NAME, {}).get("image") or self.resolve_image(spec.os)

    def instance(self, spec: LaunchSpec, offer: Offer, image: str) -> Any:
        """``compute_v1.Instance`` from the pure body (``from_json`` rejects unknown field names)."""
        body = instance_body(spec, offer, image, self.project)
        try:
            return self.api().v1.Instance.from_json(json.dumps(body))
        except Exception as exc:  # noqa: BLE001 - a bug in gcp_request, reported as such
            raise InvalidRequestError(f"the GCE request body does not parse: {exc}", code="BODY") from exc

    def submit(self, spec: LaunchSpec, offer: Offer, *, rid: str | None = None, image: str | None = None,
               attempt: CreateAttempt | None = None) -> Any:
        """Send the insert (with retries) and return its Operation, or None when the name already exists (409).
        ``create`` = check + submit + wait; tests call it alone to simulate an ``up`` killed after the insert."""
        api, zone = self.api(), str(offer.zone)
        req = api.v1.InsertInstanceRequest(project=api.project, zone=zone, request_id=rid or request_id(spec, offer),
                                           instance_resource=self.instance(spec, offer, image or self.image_for(spec)))
        if attempt is not None:
            attempt.sent = True
        return self.gce.call(lambda: api.instances.insert_unary(request=req, retry=None, timeout=self.gce.http_timeout),
                             exists=None)

    # ------------------------------------------------------------------ the contract
    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        if offer.cloud != self.NAME or not offer.zone:
            raise InvalidRequestError(f"not a zonal GCE offer: {offer.describe(spec.spot)}")
        if spec.nodes > 1:  # the group engine (gcp_cluster, gcp_group): all N nodes or none
            return self._clusters.create(spec, offer, self.image_for(spec))
        zone, rid, done = offer.zone, request_id(spec, offer), self.api().v1.Operation.Status.DONE
        attempt = CreateAttempt(spec, zone, self.gce.deadline())
        try:
            existing = self.gce.get(zone, spec.name)
            if existing is not None:
                return self._adopt(existing, spec, offer, attempt)
            if spec.ssh_from:  # the body is built (and checked) first: a request that cannot work creates no rules
                self.instance(spec, offer, self.image_for(spec))
                self._fw.ensure(spec, attempt.deadline, attempt.rules)
            for _ in range(3):
                op = self.submit(spec, offer, rid=rid, attempt=attempt)
                if op is None:  # 409: created meanwhile (a concurrent or earlier `up`)
                    found = self.gce.get(zone, spec.name)
                    if found is None:
                        raise ProviderError(f"{spec.name} was reported to exist in {zone} but is gone", code="409")
                    return self._adopt(found, spec, offer, attempt)
                replayed = op.status == done  # GCE answered with the finished operation of an earlier request
                op = self.gce.wait(zone, op, attempt.deadline)
                failure = errs.from_operation(op)
                inst = None if failure else self.gce.get(zone, spec.name)
                if replayed and (failure or inst is None):
                    rid = request_id(spec, offer, salt=op.name)  # stale: that request's VM failed or was deleted
                    continue
                if failure:
                    raise errs.classify(failure)
                if inst is None:  # our own insert finished, and the VM is gone: someone deleted it meanwhile
                    raise VanishedError(f"{spec.name} in {zone} was deleted while its create was in progress",
                                        code="DELETED_DURING_CREATE")
                return self._record(self._until_running(inst, zone, attempt.deadline), notes=ssh_notes(spec))
            raise ProviderError("GCE kept answering with operations of earlier requests", code="STALE_REQUEST_ID")
        except ProviderError as exc:
            mine = attempt.sent and not isinstance(exc, AttemptInProgressError)  # never another `up`'s VM
            notes = [self._cleanup(zone, spec, exc) if mine else None,
                     self._fw.cleanup(spec, zone, attempt.rules)]
            if notes[1]:
                exc.leaves(f"firewall rules of {spec.name}")
            exc.verified()
            if any(notes):
                exc.args = ("; ".join([str(exc), *filter(None, notes)]),)
            raise

    def _adopt(self, inst: Any, spec: LaunchSpec, offer: Offer, attempt: CreateAttempt) -> InstanceRecord:
        """An instance of that name is already in the zone: ours (same hash) is returned, else ConflictError."""
        labels, zone = dict(inst.labels), str(offer.zone)
        refuse_foreign(labels, spec, "a VM", f"in {zone}")
        tagged = ssh_tag(spec.name) in inst.tags.items
        if tagged and spec.ssh_from:  # converge the rules (missing: created; another --ssh-from: updated)
            self._fw.ensure(spec, attempt.deadline, attempt.rules)
        if inst.status in IN_FLIGHT:  # an interrupted or a concurrent `up`: the same requestId gives back its operation
            try:
                meta = {i.key: i.value for i in inst.metadata.items}
                op = self.submit(spec, offer, image=meta.get("trainvm-image") or None)
                if op is not None and op.status != self.api().v1.Operation.Status.DONE:  # the live operation: wait
                    failure = errs.from_operation(self.gce.wait(zone, op, attempt.deadline))
                    if failure and "ALREADY_EXISTS" not in (failure.code or ""):
                        raise errs.classify(failure)
                inst = self._until_running(self.gce.get(zone, spec.name) or inst, zone, attempt.deadline)
            except RetryExhaustedError as exc:
                still = self.gce.get(zone, spec.name) if exc.code == "OPERATION_TIMEOUT" else None
                if still is None or still.status not in IN_FLIGHT:
                    raise
                raise AttemptInProgressError(  # another `up` owns the name: never deleted, never duplicated elsewhere
                    f"{spec.name} in {zone} is still {still.status} after {self.op_timeout:g} s: another `trainvm up` "
                    "(or an interrupted one) is creating it", name=spec.name, where=zone) from exc
        return self._record(inst, notes=ssh_notes(spec, tagged), existing=True)

    def _until_running(self, inst: Any, zone: str, deadline: float) -> Any:
        """Poll until the VM leaves PROVISIONING/STAGING (bounded). A VM that disappears, or turns STOPPING /
        TERMINATED on its way up, was deleted or stopped by someone else: VanishedError."""
        name = inst.name

        def fetch() -> Any:
            got = self.gce.get(zone, name)
            if got is None:
                raise VanishedError(f"{name} in {zone} was deleted while `up` waited for it to start",
                                    code="DELETED_DURING_CREATE")
            return got

        def timed_out(last: Any) -> RetryExhaustedError:
            return RetryExhaustedError(f"{name} in {zone} was still {getattr(last, 'status', inst.status)} after "
                                       f"{self.op_timeout:g} s (TRAINVM_GCE_OP_TIMEOUT)", code="OPERATION_TIMEOUT")

        if inst.status in IN_FLIGHT:
            inst = poll(fetch, ready=lambda i: i.status not in IN_FLIGHT, deadline=deadline, timed_out=timed_out,
                        interval=self.gce.poll_interval, clock=self.gce.clock, sleep=self.gce.sleep)
        if inst.status in ("STOPPING", "TERMINATED", "SUSPENDING", "SUSPENDED"):
            raise VanishedError(f"{name} in {zone} is {inst.status}: it was stopped or deleted while `up` waited for it",
                                code="DELETED_DURING_CREATE")
        return inst

    def _cleanup(self, zone: str, spec: LaunchSpec, failed: ProviderError) -> str | None:
        """Delete what a failed attempt left (only a VM carrying this profile's hash), then check that GCE
        answers "not found" for it. ``failed`` is marked verified, or left (with a note) when that could not
        be established."""
        try:
            inst = self.gce.get(zone, spec.name)
            if inst is not None and dict(inst.labels).get("trainvm-hash") == spec.labels.get("trainvm-hash"):
                self.gce.delete_instance(zone, spec.name, wait=True)
                inst = self.gce.get(zone, spec.name)
            if inst is not None and dict(inst.labels).get("trainvm-hash") == spec.labels.get("trainvm-hash"):
                failed.leaves(f"{spec.name} ({zone}, {inst.status})")
                return f"{spec.name} in {zone} still exists ({inst.status}) after its deletion; run `trainvm down {spec.name}`"
            failed.verified()
            return None
        except ProviderError as exc:
            failed.leaves(f"{spec.name} ({zone})")
            return f"cleaning up {spec.name} in {zone} failed ({exc}); run `trainvm down {spec.name}`"

    def _managed(self, name: str) -> Any:
        """The first member of ``name`` (the VM, or a group's rank-0 node) when it is trainvm's, else None."""
        members, _ = self._clusters.members(name)
        first = members[0] if members else None
        return first if first is not None and dict(first.labels).get("trainvm-managed") == "true" else None

    def _members(self, name: str) -> builtins.list[Any]:
        """Every member of ``name`` (one VM or a group's nodes); ConflictError when the VM is not trainvm's."""
        members, unreachable = self._clusters.members(name)
        if not members and unreachable:  # "gone" only where GCE answered
            raise RetryExhaustedError(f"cannot tell whether {name} exists: GCE could not list "
                                      f"{', '.join(unreachable)}; try `trainvm down {name}` again", code="UNREACHABLE")
        for inst in members:
            if dict(inst.labels).get("trainvm-managed") != "true":
                raise ConflictError(f"{name} in {inst.zone.rsplit('/', 1)[-1]} is not managed by trainvm (no "
                                    "trainvm-managed label); not touching it")
        return members

    def find(self, name: str) -> InstanceRecord | None:
        inst = self._managed(name)
        return None if inst is None else self._record(inst)

    def cluster_nodes(self, name: str) -> builtins.list[InstanceRecord]:
        return self._clusters.records(name)

    def read_cluster_reports(self, name: str) -> dict[str, StackReport | None]:
        return self._clusters.reports(name)

    def list(self) -> list[InstanceRecord]:
        listing = self.gce.aggregated(MANAGED_FILTER)
        return sorted((self._record(i) for i in listing.instances), key=lambda r: (r.name, r.zone or ""))

    def delete(self, name: str, *, wait: bool = True) -> bool:
        """Every member of ``name`` (one VM, or a group's nodes), its placement policy, then its firewall rules
        (``gcp_cluster.GceClusters.delete``). No member: leftover rules only."""
        return self._clusters.delete(name, self._members(name), wait=wait)

    def stop(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self._clusters.power(self._members(name), "stop", wait=wait)

    def start(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self._clusters.power(self._members(name), "start", wait=wait)

    def read_report(self, name: str) -> tuple[StackReport | None, dict[str, Any] | None]:
        inst = self._managed(name)
        if inst is None:
            return None, None
        zone = inst.zone.rsplit("/", 1)[-1]
        meta = {i.key: i.value for i in inst.metadata.items}
        try:
            profile = json.loads(meta["trainvm-profile"]) if meta.get("trainvm-profile") else None
        except ValueError:
            profile = None
        return guest_report(self.gce, zone, inst.name) or serial_report(self.gce, zone, inst.name), profile

    def console(self, name: str, start: int = 0) -> tuple[str, int] | None:
        """Serial port 1 from byte ``start``: (text, next start); None when there is no such trainvm VM."""
        inst = self._managed(name)
        if inst is None:
            return None
        return serial_text(self.gce, inst.zone.rsplit("/", 1)[-1], inst.name, start)

    def live_status(self, record: InstanceRecord) -> str | None:
        """The ``trainvm/status`` guest attribute (no console read needed)."""
        return guest_status(self.gce, record.zone or "", record.name) if record.zone else None

    def ssh_argv(self, record: InstanceRecord, command: builtins.list[str]) -> builtins.list[str]:
        return ssh_argv(record.name, record.zone or "", self.project, command)

    def open_ssh_hint(self, record: InstanceRecord) -> str:
        return open_ssh_hint(record.name, self.project)

    def payload_store(self) -> GcsPayloadStore:
        """The project's GCS payload store (gcp_store.py); the VMs read it as the default compute service account."""
        return GcsPayloadStore(project=self.project, credentials=self._credentials,
                               service_account=self.gce.default_service_account,
                               endpoint=settings.text("TRAINVM_GCS_ENDPOINT"), call_timeout=self.gce.call_timeout,
                               retry_base_delay=self.gce.retry_base_delay)

    def _record(self, inst: Any, *, notes: builtins.list[str] | None = None, existing: bool = False) -> InstanceRecord:
        labels, zone = dict(inst.labels), inst.zone.rsplit("/", 1)[-1]
        meta = {i.key: i.value for i in inst.metadata.items}
        ip = next((ac.nat_i_p for nic in inst.network_interfaces for ac in nic.access_configs if ac.nat_i_p), None)
        cluster, rank, nodes = cluster_of(inst.name, labels)
        return InstanceRecord(
            name=inst.name, cloud=self.NAME, region=zone.rsplit("-", 1)[0], zone=zone,
            instance_type=inst.machine_type.rsplit("/", 1)[-1], state=inst.status, profile=labels.get("trainvm-profile"),
            hash=labels.get("trainvm-hash"), price_hourly=price_from_labels(labels), **costs_from_labels(labels), created=inst.creation_timestamp or None, ip=ip,
            image=meta.get("trainvm-image"), last_start=inst.last_start_timestamp or None,
            last_stop=inst.last_stop_timestamp or None,
            ssh_command=f"gcloud compute ssh {inst.name} --zone {zone} --project {self.project}",
            notes=tuple(notes or ()), adopted=existing, spot=inst.scheduling.provisioning_model == "SPOT",
            owner=labels.get("trainvm-owner"), cloud_id=str(inst.id), cluster=cluster, rank=rank, nodes=nodes,
            payload=labels.get(PAYLOAD_LABEL))
