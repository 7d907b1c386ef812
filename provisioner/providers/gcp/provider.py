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
- Create: one transaction for 1..N nodes, a single VM being a group of one (``gcp_create``: adopt, requestId
  replay, firewall rules, VanishedError, all-or-nothing cleanup; the module says why one VM is an
  ``instances.insert`` and N nodes one ``instances.bulkInsert``).
- Every other verb resolves what a name stands for once (``gcp_cluster.GceClusters.members``: the VM called NAME,
  also one made before groups existed, else the nodes labelled with it) and acts on each member.
"""

from __future__ import annotations

import builtins
import json
import os
import random
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING

from provisioner import settings
from provisioner.errors import CredentialsError
from provisioner.providers.base import (
    ConflictError,
    InstanceRecord,
    InvalidRequestError,
    LaunchSpec,
    RetryExhaustedError,
    costs_from_labels,
    price_from_labels,
)
from provisioner.providers.capabilities import ClusterReader, ImagePinner, PartialLister
from provisioner.providers.gcp.api import GceApi
from provisioner.providers.gcp.auth import default_credentials
from provisioner.providers.gcp.cluster import GceClusters
from provisioner.providers.gcp.cluster_request import cluster_of
from provisioner.providers.gcp.create import GceCreate
from provisioner.providers.gcp.firewall import SshFirewall
from provisioner.providers.gcp.report import guest_report, guest_status, serial_report, serial_text
from provisioner.providers.gcp.request import (
    image_family,
    open_ssh_hint,
    ssh_argv,
)
from provisioner.providers.gcp.store import GcsPayloadStore
from provisioner.providers.offer import Offer
from provisioner.providers.stack_report import StackReport
from provisioner.providers.store import PAYLOAD_LABEL
from provisioner.settings import env_seconds

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

    from provisioner.providers.gcp.sdk_types import Instance, Operation

MANAGED_FILTER = "labels.trainvm-managed = true"


class GcpProvider(ImagePinner, ClusterReader, PartialLister):
    NAME = "gcp"

    def __init__(self, *, project: str | None = None, endpoint: str | None = None, credentials: Credentials | None = None,
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
        self._creator = GceCreate(self.gce, self._fw, self._clusters, self._record, self.image_for, op_timeout)

    def api(self) -> SimpleNamespace:
        """The compute_v1 module, project and clients (built once, on first use)."""
        return self.gce.clients()

    def _auth(self) -> tuple[Credentials, str]:
        project = self._project or os.environ.get("GOOGLE_CLOUD_PROJECT") or None
        if self.endpoint:
            from google.auth.credentials import AnonymousCredentials

            return self._credentials or AnonymousCredentials(), project or "trainvm-test"  # type: ignore[no-untyped-call]
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

    def instance(self, spec: LaunchSpec, offer: Offer, image: str) -> Instance:
        """``compute_v1.Instance`` of one member (``gcp_create``; ``from_json`` rejects unknown field names)."""
        return self._creator.instance(spec, offer, image)

    def submit(self, spec: LaunchSpec, offer: Offer, *, rid: str | None = None, image: str | None = None) -> Operation | None:
        """Send the insert of a group of one (with retries) and return its Operation, or None when the name already
        exists (409). Tests call it alone to simulate an ``up`` killed after the insert."""
        return self._creator.submit(spec, offer, image, rid=rid)

    # ------------------------------------------------------------------ the contract
    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        """One transaction for 1..N nodes (``gcp_create``: a single VM is a group of one)."""
        if offer.cloud != self.NAME or not offer.zone:
            raise InvalidRequestError(f"not a zonal GCE offer: {offer.describe(spec.spot)}")
        return self._creator.create(spec, offer)

    def _until_running(self, inst: Instance, zone: str, deadline: float) -> Instance:
        return self._creator.until_running(inst, zone, deadline)

    def _managed(self, name: str) -> Instance | None:
        """The first member of ``name`` (the VM, or a group's rank-0 node) when it is trainvm's, else None."""
        members, _ = self._clusters.members(name)
        first = members[0] if members else None
        return first if first is not None and dict(first.labels).get("trainvm-managed") == "true" else None

    def _members(self, name: str) -> builtins.list[Instance]:
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
        return self.list_partial()[0]

    def list_partial(self) -> tuple[builtins.list[InstanceRecord], builtins.list[str]]:
        listing = self.gce.aggregated(MANAGED_FILTER)
        found = sorted((self._record(i) for i in listing.instances), key=lambda r: (r.name, r.zone or ""))
        return found, list(listing.unreachable)

    def delete(self, name: str, *, wait: bool = True) -> bool:
        """Every member of ``name`` (one VM, or a group's nodes), its placement policy, then its firewall rules
        (``gcp_cluster.GceClusters.delete``). No member: leftover rules only."""
        return self._clusters.delete(name, self._members(name), wait=wait)

    def stop(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self._clusters.power(self._members(name), "stop", wait=wait)

    def start(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self._clusters.power(self._members(name), "start", wait=wait)

    def read_report(self, name: str) -> tuple[StackReport | None, dict[str, object] | None]:
        inst = self._managed(name)
        if inst is None:
            return None, None
        zone = inst.zone.rsplit("/", 1)[-1]
        meta = {i.key: i.value for i in inst.metadata.items}
        profile: dict[str, object] | None
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

    def _record(self, inst: Instance, *, notes: builtins.list[str] | None = None, existing: bool = False) -> InstanceRecord:
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
