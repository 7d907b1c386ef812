"""The record types of the cloud table (providers/clouds.py ``CLOUDS``): one ``CloudSpec`` per cloud and the
facts it is made of. Pure data, no SDK; the lookups are in providers/registry.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

#: The clouds trainvm knows (the profile's ``placement.clouds`` accepts exactly these; a test checks that
#: this spelling and ``CLOUDS`` agree).
CloudName = Literal["gcp", "azure", "aws", "local"]
OsName = Literal["ubuntu-22.04", "ubuntu-24.04", "debian-12"]
OS_NAMES: tuple[str, ...] = get_args(OsName)
DISK_TYPES: tuple[str, ...] = ("standard", "balanced", "ssd")
UserDataEncoding = Literal["plain", "base64"]


@dataclass(frozen=True)
class UserDataFormat:
    """How a create request carries the bootstrap (render/bootstrap.py), and the cloud's limit on it."""

    kind: Literal["gce-metadata", "azure-custom-data", "ec2-user-data", "nocloud-user-data"]
    encoding: UserDataEncoding  # in the wire request: as is, or base64 (Azure customData, raw EC2 API)
    limit: int
    limit_unit: str  # what ``limit`` counts


@dataclass(frozen=True)
class PayloadStoreFacts:
    """Where a VM's payload is staged on this cloud (providers/store.py; the provider's ``payload_store()``
    does it) and how the VM reads it, as ``plan`` and ``render`` show it before any cloud is asked."""

    title: str  # "Cloud Storage (GCS)"
    #: the store's name; the account part (project, account id, subscription hash) is only known at ``up``
    name: str
    #: the object's URL, as the bootstrap fetches it ({region}, {key}, {key_quoted})
    url: str
    #: what the VM's identity needs, in words
    access: str
    #: the metadata server the VM asks for its identity's token or credentials
    metadata_url: str
    #: a lifecycle rule removes objects ``providers/store.EXPIRE_DAYS`` after their last upload (the clouds'
    #: object stores); False: nothing expires, ``down`` of the last VM that names an object removes it
    expires: bool = True
    #: the store bills its space (``describe`` bounds it); False: a folder on the machine running trainvm, no bill
    billed: bool = True
    #: how the VM reads the object, in words, for the payload line of ``plan`` and the ``up`` summary
    reads: str = "read with the VM's identity"


@dataclass(frozen=True)
class RegistryLogin:
    """The cloud's own container registries, which its VM logs in to with its identity (providers/registry_auth.py)."""

    title: str  # "Artifact Registry"
    hosts: str  # regex (fullmatch) over the registry host
    login: Literal["gcp-token", "ecr", "acr"]  # what the on-VM helper does (templates/files/trainvm_helper.py)
    needs: str  # what the VM's identity needs, in words


@dataclass(frozen=True)
class SecretRefForm:
    """One spelling of ``secret://KIND/...`` that a VM of the cloud resolves with its own identity
    (profile/fields.py builds ``SECRET_REF_RE`` and ``SECRET_HINT`` from every cloud's forms)."""

    pattern: str  # regex over what follows ``secret://``, starting with the store's KIND and "/" (no anchors)
    hint: str  # how error messages spell it ("secret://gcp/NAME")


@dataclass(frozen=True)
class GceImage:
    project: str
    family: str

    def lock_ref(self) -> dict[str, str]:
        return {"project": self.project, "family": self.family}


@dataclass(frozen=True)
class AzureImage:
    publisher: str
    offer: str
    sku: str  # Generation 2
    gen1_sku: str | None = None  # for sizes that boot only Generation 1 images

    def lock_ref(self) -> dict[str, str]:
        return {"publisher": self.publisher, "offer": self.offer, "sku": self.sku}


@dataclass(frozen=True)
class AmiParameter:
    ssm_parameter: str  # a public SSM parameter whose value is the current AMI id (resolved at `up`)

    def lock_ref(self) -> dict[str, str]:
        return {"ssm_parameter": self.ssm_parameter}


@dataclass(frozen=True)
class LocalImage:
    """A base qcow2 on this machine (the ``local`` cloud): the file a setting names. ``source`` is where the official
    image is published; trainvm pins no download of its own (no checksum it could cite offline: docs/local.md)."""

    setting: str  # the TRAINVM_* setting that names the file (provisioner/settings.py)
    source: str  # the publisher's page of the official cloud image

    def lock_ref(self) -> dict[str, str]:
        return {}  # nothing a lock file can pin: a file on this machine (registry.image_refs leaves it out)


ImageRef = GceImage | AzureImage | AmiParameter | LocalImage


@dataclass(frozen=True)
class ReadyEstimate:
    """Expected time from create to ready, cold install vs a baked image: an **estimate** from a public report (its
    ``source``), shown by ``plan`` (provisioner/bake/ready_time.py words it); never measured by trainvm."""

    cold_s: int  # from create to ready when the startup script installs the stack
    baked_s: int  # from create to ready when the VM boots a baked image (the script only verifies)
    source: str

    def seconds(self, baked: bool) -> int:
        return self.baked_s if baked else self.cold_s


@dataclass(frozen=True)
class LifecycleFacts:
    stop: str  # what `stop` / on_idle|on_max_run=stop does, as the console shows it
    delete: str
    kept_billing: str  # what keeps billing after a stop
    #: the cloud enforces lifecycle.max_run_hours itself (GCE maxRunDuration); else a timer on the VM
    enforces_max_run: bool
    #: what a shutdown from inside the guest does: stop; "settable" at create (lifecycle.guest_shutdown_action
    #: chooses it); or nothing (keeps billing)
    guest_shutdown: Literal["stop", "settable", "keep-billing"]
    spot_reclaim: Callable[[str], str]  # on_max_run -> what reclaiming a spot VM does
    #: where the guest shutdown is settable: what a ``delete`` is when the shutdown is set to stop (a mixed
    #: stop/delete), i.e. the VM's own API call (lifecycle.api_actions); ``delete`` says the uniform case
    self_delete: str | None = None
    #: InstanceRecord states (upper case) of a VM that is not running yet still bills compute: Azure's
    #: PowerState/stopped (a poweroff from the guest or the portal's "stop" without deallocation) and its -ing state
    allocated_states: frozenset[str] = frozenset()


@dataclass(frozen=True)
class CloudSpec:
    name: CloudName
    title: str  # how messages name the cloud ("GCE")
    credential_hint: str
    user_data: UserDataFormat
    payload: PayloadStoreFacts
    kernel_flavour: str
    os_images: Mapping[str, ImageRef]
    os_arches: Mapping[str, frozenset[str]]
    disk_types: Mapping[str, str]
    native_schemes: frozenset[str]
    secret_kinds: frozenset[str]
    #: the ``secret://`` references a profile may write for this cloud's store (names as the store allows them)
    secret_refs: tuple[SecretRefForm, ...]
    ssh_default: str
    lifecycle: LifecycleFacts
    nvswitch_shapes: str  # regex over the instance type (compiled where used)
    #: where ``up --wait-ready`` reads the startup script's status besides the console
    #: (``Provider.live_status``); None: the console only (Azure boot diagnostics, AWS console output)
    live_status: str | None = None
    notes: tuple[str, ...] = field(default=())
    #: planned when a profile names no ``placement.clouds``. Changing this set changes no profile hash: the
    #: hash spells a clouds list the profile does not write as ``HASHED_DEFAULT_CLOUDS``
    default: bool = True
    #: the provider creates multi-node clusters (``hardware.nodes`` > 1) on the cloud's own group engine
    #: (``Provider.create`` with ``LaunchSpec.nodes`` > 1, ``cluster_nodes``, ``read_cluster_reports``;
    #: providers/base.py). Without it the planner rejects that cloud's offers for a cluster (reason ``cluster``)
    group_engine: bool = False
    #: the copy tool (data scheme) whose hash-locked SDK venv the VM installs for its own API calls with its identity
    #: (secrets, lifecycle): AWS "s3" (boto3: curl's --aws-sigv4 before 7.86 cannot sign a session token, and nothing
    #: is signed by hand); None where the VM calls the cloud's REST API with a metadata-server token (GCE, Azure)
    vm_api_sdk: str | None = None
    #: the cloud's own container registries, pulled from with the VM's identity (None: none)
    registry_login: RegistryLogin | None = None
    #: an example ``placement.identity`` value for this cloud (the profile reference's example; with identity_check)
    identity_example: str | None = None
    #: the VM runs on the machine running trainvm: its CPUs, memory and disks (files) are that machine's own and
    #: bill nothing, so the plan prices compute and disks at 0 with these words as the source; None: the cloud bills
    #: them (compute: the catalog or the cloud's price source; disks: catalog/data/disks.csv)
    on_host: str | None = None
    #: the expected time to ready from a public report (issue #28), cold vs baked; None: no published figure
    #: (``plan`` says unknown, never guesses)
    ready_estimate: ReadyEstimate | None = None

    #: trainvm creates VMs there (its hooks, provisioner/hooks/, have a ``provider``); False: planned and rendered
    #: for review, never provisioned (tests/unit/test_hooks.py keeps the two in step)
    provisionable: bool = True
    #: the cloud has no GPU: a profile that asks for one is rehearsed there (every phase runs, the GPU gate
    #: reports ``rehearsal: no GPU``), never passed
    rehearsal: bool = False
