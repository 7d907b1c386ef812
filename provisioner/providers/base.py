"""The provider contract and the records that cross it.

A provider is thin: a pure request builder (``*_request.py``) plus SDK calls. It classifies every
cloud error into one of the ``ProviderError`` subclasses below, which drive failover:
capacity -> next zone, quota -> next region (or the next cloud), auth/validation -> stop.
"""

from __future__ import annotations

import builtins
import getpass
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, NotRequired, Protocol, TypedDict

# The ProviderError family lives in provisioner/errors.py (the whole error tree in one place); it is
# re-exported here (``__all__``, which mypy's no_implicit_reexport reads) because every provider raises it.
from provisioner.errors import (  # noqa: F401
    AttemptInProgressError,
    AuthError,
    CapacityError,
    Cleanup,
    ConflictError,
    CredentialsError,
    InvalidRequestError,
    Outcome,
    ProviderError,
    QuotaError,
    RegionUnavailableError,
    RetryExhaustedError,
    VanishedError,
)
from provisioner.providers.store import PAYLOAD_LABEL

if TYPE_CHECKING:
    from provisioner.container.reference import ImageRef
    from provisioner.providers.offer import Offer
    from provisioner.providers.stack_report import StackReport
    from provisioner.providers.store import PayloadRef, PayloadStore


__all__ = [
    "AttemptInProgressError", "AuthError", "CapacityError", "Cleanup", "ConflictError", "CredentialsError",
    "InvalidRequestError", "Outcome", "ProviderError", "QuotaError", "RegionUnavailableError", "RetryExhaustedError",
    "VanishedError", "LaunchSpec", "SecretRef", "InstanceRecord", "Provider", "OWNER_RE", "owner_label", "vm_name",
    "PRICE_LABEL", "price_label",
    "DISKS_PRICE_LABEL", "KEPT_PRICE_LABEL", "RecordedCosts", "costs_from_labels", "price_from_labels", "labels_for",
    "refuse_foreign",
]


@dataclass(frozen=True, order=True)
class SecretRef:
    """One ``secret://KIND/NAME`` reference of the resolved profile (a ``stack.env`` value, a ``data[].credential``,
    ``stack.container.registry_auth``): what the VM resolves with its own identity, so what a provider grants that
    identity access to (GCE's cloud-platform scope, AWS's GetSecretValue). Never found by searching the profile's
    text: a string that merely contains ``secret://`` is not a reference."""

    kind: str  # the secret store (registry ``CloudSpec.secret_kinds``): gcp, aws, azure-keyvault
    name: str  # what follows ``secret://KIND/``

    @classmethod
    def parse(cls, ref: str) -> SecretRef:
        kind, _, name = ref.removeprefix("secret://").partition("/")
        return cls(kind, name)


@dataclass(frozen=True)
class LaunchSpec:
    """Everything ``create`` needs; built by ``provision.launch_spec`` from the plan and the render."""

    name: str
    profile_name: str
    profile_hash: str  # full sha256
    #: the resolved profile, canonical JSON: the label/metadata/user data stored on the VM, an OUTPUT only; no
    #: provider reads a fact back out of it (tests/unit/test_spec_is_typed.py), each has its typed field below
    profile_json: str
    labels: dict[str, str]
    startup_script: str  # the script as it runs on the VM (inside the payload)
    user_data: str | bytes  # the bootstrap (render/bootstrap.py), before any base64 the cloud's API wants
    os: str
    boot_disk_type: str
    boot_disk_gib: int
    local_nvme_gib: int
    spot: bool
    max_price_per_hour: float | None
    max_run_hours: float | None
    ssh_from: str | None
    data_sources: tuple[str, ...] = ()
    price_hourly: float | None = None  # the price that applies to the offer (spot price for spot VMs); also in labels
    idle_shutdown_minutes: int | None = None  # lifecycle.idle_shutdown_minutes (None: no idle watchdog)
    on_idle: str = "stop"  # lifecycle.on_idle: stop | delete
    on_max_run: str = "stop"  # lifecycle.on_max_run: stop | delete
    # NAME.lock's pinned OS image per cloud (``images`` of the lock, resolved entries only): a provider
    # boots that image instead of resolving the family/URN/SSM parameter again
    locked_images: dict[str, dict[str, str]] = field(default_factory=dict)
    #: hardware.nodes: > 1 asks ``create`` for a cluster of that many identical VMs on the cloud's group engine
    nodes: int = 1
    #: placement.compact as resolved by the plan (only meaningful when nodes > 1)
    compact: bool = False
    #: the staged payload the bootstrap in ``user_data`` fetches (providers/store.py); the provider scopes the
    #: VM identity's read access to it (AWS instance profile, Azure role assignment). None: no payload
    payload: PayloadRef | None = None
    #: a baked image (``Baker.find``'s ``BakedImage.ref``) the VM boots instead of the OS image; its payload is
    #: rendered in ``baked`` mode (docs/bake.md). A cloud with a baker must boot it; None: the OS image
    boot_image: str | None = None
    #: every secret reference of the resolved profile, sorted (``provision.launch.secret_refs``): the provider
    #: grants the VM's identity what reading them needs, from this field and never from ``profile_json``'s text
    secret_refs: tuple[SecretRef, ...] = ()
    #: stack.container.image as the profile's record parsed it once (``LoadedProfile.resolved.image``); None: no
    #: container. What the VM's identity must be allowed to pull (AWS: ECR reads on that repository)
    image: ImageRef | None = None
    #: stack.container.registry_auth: the secret:// reference the VM logs in to the registry with (None: the VM's
    #: identity on its own cloud's registry, else anonymous; providers/registry_auth.py)
    registry_auth: str | None = None
    #: placement.identity: cloud -> the identity an administrator made once, used instead of the one trainvm makes
    #: (azure: a user-assigned managed identity's resource id); empty: trainvm's own identity everywhere
    identity: Mapping[str, str] = field(default_factory=dict)


class RecordJson(TypedDict):
    """``InstanceRecord.to_json()``: what ``list``/``status``/``up --json`` print of a VM (status rows extend it)."""

    name: str
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    state: str
    profile: str | None
    hash: str | None
    price_hourly: float | None
    created: str | None
    cluster: NotRequired[str | None]  # the three only on a cluster's node
    rank: NotRequired[int | None]
    nodes: NotRequired[int]


@dataclass(frozen=True)
class InstanceRecord:
    """A trainvm VM as the cloud reports it (rebuilt from labels/tags; no local state)."""

    name: str
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    state: str
    profile: str | None
    hash: str | None
    price_hourly: float | None = None
    created: str | None = None
    ip: str | None = None
    image: str | None = None
    #: when the VM last started / stopped, as the cloud reports it (None: the cloud does not say)
    last_start: str | None = None
    last_stop: str | None = None
    #: ``last_start`` is only the latest time the VM can have started (Azure: the end of its last control-plane
    #: operation), so a running cost counted from it is a lower bound
    last_start_is_latest: bool = False
    #: how to open SSH to it (the cloud's own CLI, or ``ssh user@ip``); None while it has no address
    ssh_command: str | None = None
    #: the login user for SSH (None: the provider's default)
    ssh_user: str | None = None
    #: the TCP port SSH answers on at ``ip`` (the local cloud forwards a port of 127.0.0.1 to the VM's 22)
    ssh_port: int = 22
    #: what ``up`` must tell about this VM (who can SSH in, a role it could not be given...)
    notes: tuple[str, ...] = ()
    #: ``create`` found this VM already there with the same profile hash and returned it (nothing was created)
    adopted: bool = False
    #: a spot/preemptible VM (None: the cloud did not say)
    spot: bool | None = None
    #: the ``trainvm-owner`` label/tag (the local user who created it)
    owner: str | None = None
    #: the cloud's own id of the VM (GCE instance id, Azure resource id)
    cloud_id: str | None = None
    #: the cluster this VM is a node of (None: a single VM); ``name`` is then the node's own name
    cluster: str | None = None
    #: the node's rank in its cluster (0 holds MASTER_ADDR); None for a single VM
    rank: int | None = None
    #: how many nodes the cluster has (1 for a single VM)
    nodes: int = 1
    #: the ``trainvm-payload`` label: the first 16 hex of the sha256 of the payload it was created with
    payload: str | None = None
    #: the disks' $/h recorded at create time (``DISKS_PRICE_LABEL``: boot disk + local SSD while running;
    #: ``KEPT_PRICE_LABEL``: what the VM keeps costing while stopped); None: not recorded or not known
    disks_hourly: float | None = None
    kept_hourly: float | None = None

    def to_json(self) -> RecordJson:
        doc: RecordJson = {"name": self.name, "cloud": self.cloud, "region": self.region, "zone": self.zone,
                           "instance_type": self.instance_type, "state": self.state, "profile": self.profile,
                           "hash": self.hash, "price_hourly": self.price_hourly, "created": self.created}
        if self.cluster:
            doc["cluster"], doc["rank"], doc["nodes"] = self.cluster, self.rank, self.nodes
        return doc


class Provider(Protocol):
    NAME: str

    def find(self, name: str) -> InstanceRecord | None:
        """The trainvm VM called ``name`` or None. Never raises for 'not found'."""

    def create(self, spec: LaunchSpec, offer: Offer) -> InstanceRecord:
        """Create the VM for ``offer`` and wait until it runs. Idempotent for the same spec (request ids,
        deterministic names). On any failure, deletes what the attempt made and raises a ``ProviderError`` whose
        ``cleanup`` says whether that was checked ("verified") or what may be left (``leaves``)."""

    def list(self) -> list[InstanceRecord]:
        """Every VM labelled ``trainvm-managed=true`` that the credentials can see."""

    def delete(self, name: str, *, wait: bool = True) -> bool:
        """Delete the VM and everything created for it. False when it was already gone."""

    def stop(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        """Stop the VM so compute billing ends (GCE stop; Azure deallocate); disks stay. None when not found."""

    def start(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        """Start a stopped VM (its startup script re-verifies the stack). None when not found."""

    def read_report(self, name: str) -> tuple[StackReport | None, dict[str, object] | None]:
        """(the latest TRAINVM_REPORT found, the resolved profile stored on the VM)."""

    def ssh_argv(self, record: InstanceRecord, command: builtins.list[str]) -> builtins.list[str]:
        """The command line that opens SSH to the VM (user, key and address), running ``command`` if given."""

    def open_ssh_hint(self, record: InstanceRecord) -> str:
        """How to open the firewall for SSH to this VM."""

    def console(self, name: str, start: int = 0) -> tuple[str, int] | None:
        """The VM's console output from offset ``start``: (text, next offset) -- the provisioning log with
        its ``TRAINVM_STATUS`` lines. None when there is no such trainvm VM."""

    # ---- clusters (LaunchSpec.nodes > 1; docs/spec.md "Multi-node clusters") ----------------------------
    # ``create`` with spec.nodes > 1 creates every node on the cloud's own group engine, all or nothing, writes
    # the node list (render/cluster.py) on every node and returns the rank-0 node's record (cluster, rank,
    # nodes set). A capacity failure raises CapacityError after deleting every node and placement resource,
    # so failover moves the whole group. ``find(NAME)`` of a cluster returns its rank-0 record; ``list``
    # returns one record per node (cluster/rank set; commands group them); ``delete``/``stop``/``start``
    # of NAME act on every node and, for delete, the placement resources.

    def cluster_nodes(self, name: str) -> builtins.list[InstanceRecord]:
        """The nodes of cluster ``name`` in rank order ([] when there is no such cluster)."""

    def read_cluster_reports(self, name: str) -> dict[str, StackReport | None]:
        """Every node's latest TRAINVM_REPORT, keyed by node name, rank order (None: no report yet)."""

    def payload_store(self) -> PayloadStore:
        """The cloud's payload store (providers/store.py) on this provider's credentials."""

    def live_status(self, record: InstanceRecord) -> str | None:
        """The startup script's latest ``TRAINVM_STATUS`` value from a channel faster than the console, on
        clouds whose registry entry has one (``CloudSpec.live_status``); None when it has nothing yet."""


OWNER_RE = re.compile(r"[^a-z0-9_-]")


def owner_label() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        user = os.environ.get("USER", "unknown")
    return OWNER_RE.sub("", user.lower())[:63] or "unknown"


def vm_name(profile_name: str, profile_hash: str, override: str | None = None) -> str:
    """``trainvm-<profile>-<first 8 hex of the hash>`` unless ``--name`` (SPEC "What up creates")."""
    return override or f"trainvm-{profile_name}-{profile_hash[:8]}"


#: Label/tag holding the hourly price recorded at create time, in micro-USD with a "u" suffix
#: ("526000u" = $0.526/h): GCE label values allow only [a-z0-9_-], so no dot and no "$".
PRICE_LABEL = "trainvm-price"


def price_label(price: float) -> str:
    return f"{round(price * 1_000_000)}u"


#: Labels/tags holding the disks' $/h at create time (catalog/costs.py), as ``price_label`` writes prices: the boot
#: disk + local SSD while running, and what a stopped VM keeps costing (its persistent disks). Absent when unknown.
DISKS_PRICE_LABEL = "trainvm-disks-price"
KEPT_PRICE_LABEL = "trainvm-kept-price"


class RecordedCosts(TypedDict):
    disks_hourly: float | None
    kept_hourly: float | None


def costs_from_labels(labels: dict[str, str] | None) -> RecordedCosts:
    """``InstanceRecord`` keyword arguments for the disk prices recorded at create time."""
    return {"disks_hourly": price_from_labels(labels, DISKS_PRICE_LABEL),
            "kept_hourly": price_from_labels(labels, KEPT_PRICE_LABEL)}


def price_from_labels(labels: dict[str, str] | None, key: str = PRICE_LABEL) -> float | None:
    """The price recorded by ``price_label`` (None when absent or malformed: a VM of an older trainvm)."""
    raw = (labels or {}).get(key, "")
    if not re.fullmatch(r"[0-9]{1,12}u", raw):
        return None
    return int(raw[:-1]) / 1_000_000


def labels_for(profile_name: str, profile_hash: str, price_hourly: float | None = None,
               payload_sha256: str | None = None, *, disks_hourly: float | None = None,
               kept_hourly: float | None = None) -> dict[str, str]:
    labels = {
        "trainvm-managed": "true",
        "trainvm-profile": profile_name,
        "trainvm-hash": profile_hash[:16],
        "trainvm-owner": owner_label(),
    }
    if price_hourly is not None:
        labels[PRICE_LABEL] = price_label(price_hourly)
    for key, value in ((DISKS_PRICE_LABEL, disks_hourly), (KEPT_PRICE_LABEL, kept_hourly)):
        if value is not None:
            labels[key] = price_label(value)
    if payload_sha256 is not None:  # `down` keeps a payload another VM carries (providers/store.py)
        labels[PAYLOAD_LABEL] = payload_sha256[:16]
    return labels


def refuse_foreign(marks: dict[str, str], spec: LaunchSpec, thing: str, where: str, *,
                   other: str | None = None, other_where: str | None = None) -> None:
    """Something called ``spec.name`` already exists ``where`` ("in us-east1-b"): raise ConflictError unless trainvm
    made it (``marks``: its labels/tags from ``labels_for``) for this version of the profile (same hash), the one
    ownership check of every provider's adopt path. ``thing`` names it ("a VM", "an instance", "a scale set");
    ``other``/``other_where`` name it in the second message where the cloud says it differently."""
    if marks.get("trainvm-managed") != "true":
        raise ConflictError(f"{thing} named {spec.name} already exists {where} and is not managed by trainvm; "
                            "pass --name to choose another name")
    if marks.get("trainvm-hash") != spec.labels.get("trainvm-hash"):
        raise ConflictError(f"{other or thing} named {spec.name} already exists {other_where or where} for another version "
                            f"of the profile (hash {marks.get('trainvm-hash')}); run `trainvm down {spec.name}` or pass --name")
