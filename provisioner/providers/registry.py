"""What trainvm knows about each cloud, in one typed table (``CLOUDS``); everything outside
``providers/`` asks this module instead of branching on a cloud's name. Pure data: importing it imports
no SDK (``--help``, ``validate`` and ``plan`` stay SDK-free; a test checks it).

Adding a cloud: one ``CloudSpec`` below (plus its catalog rows, provider module and request builder).
A cloud with ``provider=None`` is planned and rendered for review but never provisioned; whether an offer is
provisionable is derived from this table at plan time (``provisionable``), not stored in the catalog.

Per-cloud facts and their sources:

* ``user_data``: what the create request carries the bootstrap in, and the platform limit checked at
  render time (GCE: one metadata value <= 256 KiB; Azure: customData <= 87,380 base64 characters = 64 KiB
  raw; EC2: user data <= 16,384 bytes raw). The bootstrap is 3-4 KB gzipped whatever the profile.
* ``payload``: where the payload the bootstrap fetches is staged (GCS bucket, Blob container, S3 bucket per
  account and region; providers/store.py) and what the VM's identity needs to read it.
* ``kernel_flavour``: Ubuntu's cloud-tuned kernel metapackages (linux-<flavour>, linux-headers-<flavour>)
  whose headers DKMS builds the NVIDIA module against (Debian uses linux-image-cloud-amd64 on every cloud).
* ``os_images``: GCE public image families (ubuntu-os-cloud, debian-cloud); Azure Marketplace URNs
  (Canonical, Debian; Gen2 SKU, and the Gen1 SKU for Gen1-only sizes); AWS public SSM parameters that
  name the current AMI (Canonical, Debian). ``os_arches``: architectures with a published image.
* ``disk_types``: profile ``boot_disk.type`` (standard | balanced | ssd) -> the cloud's disk type (GCE
  narrows it per machine family: ``family_disk_map``, providers/gcp/families.py ``GCE_FAMILIES``).
* ``native_schemes``: the data URL schemes a VM of that cloud reads with its own identity, no secret
  needed (gs:// through the GCE VM's service-account scope, s3:// through an AWS instance profile, az://
  through the Azure VM's managed identity). Any other scheme needs a credential reference
  (``data[].credential``) or must be a plain https:// URL.
* ``secret_kinds``: the ``secret://KIND/...`` stores a VM of that cloud reads with its own identity (the startup
  script resolves data credentials and secret stack.env values on the VM): Secret Manager on GCE (metadata-server
  token), Key Vault on Azure (managed identity), Secrets Manager on AWS (instance profile). A data credential in
  another cloud's store cannot be read there.
* ``ssh_default``: who can reach port 22 when neither ``placement.ssh_from`` nor ``--ssh-from`` is set.
* ``lifecycle``: what stop/delete do and what keeps billing (providers/lifecycle.py words it).
* ``nvswitch_shapes``: 8-GPU HGX shapes whose GPUs talk through NVSwitch (they need fabric manager).
* ``registry_login``: the container registries a VM of that cloud logs in to with its own identity, and how
  (providers/registry_auth.py decides per image; the startup script's helper does it): GCE Artifact Registry /
  Container Registry with the metadata server's access token as user ``oauth2accesstoken``; ECR with
  ``ecr:GetAuthorizationToken`` through boto3; ACR with an IMDS token exchanged at ``https://REGISTRY/oauth2/exchange``.
* what a VM can read (data locality, secret stores) and what a cross-cloud copy costs: providers/access.py
  (egress prices: data/egress.yaml, each with its source and whether it was checked).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, get_args

from provisioner.providers.names import or_list

if TYPE_CHECKING:
    from provisioner.providers.placement import ShapePlacement

#: The clouds trainvm knows (the profile's ``placement.clouds`` accepts exactly these; a test checks that
#: this spelling and ``CLOUDS`` agree).
CloudName = Literal["gcp", "azure", "aws"]
OsName = Literal["ubuntu-22.04", "ubuntu-24.04", "debian-12"]
OS_NAMES: tuple[str, ...] = get_args(OsName)
DISK_TYPES: tuple[str, ...] = ("standard", "balanced", "ssd")
UserDataEncoding = Literal["plain", "base64"]


@dataclass(frozen=True)
class UserDataFormat:
    """How a create request carries the bootstrap (render/bootstrap.py), and the cloud's limit on it."""

    kind: Literal["gce-metadata", "azure-custom-data", "ec2-user-data"]
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


ImageRef = GceImage | AzureImage | AmiParameter


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


@dataclass(frozen=True)
class CloudSpec:
    name: CloudName
    title: str  # how messages name the cloud ("GCE")
    #: "module:Class" of the provider, imported only when a command needs it; None: plan/render only
    provider: str | None
    #: module with the pure ``request_preview(spec, offer) -> dict`` (the body ``up`` would send)
    request_builder: str
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
    #: "module:function" that prices the catalog's shapes from the cloud's public price API for
    #: ``trainvm catalog refresh`` (catalog/refresh.py ``Fetch``); imported only when a refresh runs
    price_source: str | None = None
    #: "module:function" that checks a ``placement.identity`` value for this cloud (a pre-made VM identity an
    #: administrator granted once; pure, no SDK) and returns it normalised; None: the cloud takes none
    identity_check: str | None = None
    #: an example ``placement.identity`` value for this cloud (the profile reference's example; with identity_check)
    identity_example: str | None = None
    #: "module:function" returning the cloud's quota reader for a provider (provision/quota.py ``QuotaSource``)
    #: for the quota preflight of ``up`` and ``plan --quota``; imported only when quotas are read
    quota_reader: str | None = None
    #: "module:Class" of the cloud's ``Baker`` (providers/bake_base.py), built from its provider, for ``trainvm bake`` and
    #: ``trainvm images``; None: this cloud cannot bake yet (docs/bake.md)
    baker: str | None = None
    #: "module:function" ``(family) -> Mapping[profile disk type, cloud disk type] | None``: the boot disk types of
    #: one machine family where the cloud narrows them per family (GCE); None (or a None answer): ``disk_types``
    family_disk_map: str | None = None
    #: "module:function" ``(Offer) -> list[str]``: the cloud's own consistency checks of one catalog row
    #: (catalog/storage.py ``validate_offers``); None: only the checks every cloud gets
    catalog_check: str | None = None
    #: "module:function" ``(instance type) -> family``: the catalog's ``family`` of a shape (the placement facts and
    #: per-family tables are keyed by it; catalog/families.py ``family_of``); None: the instance type is its own family
    family_of: str | None = None
    #: the expected time to ready from a public report (issue #28), cold vs baked; None: no published figure
    #: (``plan`` says unknown, never guesses)
    ready_estimate: ReadyEstimate | None = None

    @property
    def provisionable(self) -> bool:
        return self.provider is not None


def _x86(*names: str) -> Mapping[str, frozenset[str]]:
    return MappingProxyType({o: frozenset({"x86_64"}) for o in names})


CLOUDS: Mapping[str, CloudSpec] = MappingProxyType({c.name: c for c in (
    CloudSpec(
        name="gcp",
        title="GCE",
        provider="provisioner.providers.gcp.provider:GcpProvider",
        baker="provisioner.providers.gcp.bake:GceBaker",
        request_builder="provisioner.providers.gcp.request",
        price_source="provisioner.providers.gcp.prices:fetch",
        quota_reader="provisioner.providers.gcp.quota:reader",
        family_disk_map="provisioner.providers.gcp.families:family_disk_map",
        catalog_check="provisioner.providers.gcp.families:check_offer",
        family_of="provisioner.providers.gcp.families:gce_family",
        ready_estimate=ReadyEstimate(cold_s=215, baked_s=75, source="public report cited in issue #28: 3m35s cold "
                                     "install -> 1m15s from a custom image on GCE"),
        credential_hint="GCE: set GOOGLE_CLOUD_PROJECT and run `gcloud auth application-default login`",
        user_data=UserDataFormat("gce-metadata", "plain", 262_144, "bytes per metadata value"),
        payload=PayloadStoreFacts(
            title="Cloud Storage (GCS)",
            name="trainvm-PROJECT-{region}",
            url="https://storage.googleapis.com/storage/v1/b/trainvm-PROJECT-{region}/o/{key_quoted}?alt=media",
            access="roles/storage.objectViewer on the bucket for the VM's service account, scope devstorage.read_only",
            metadata_url="http://metadata.google.internal",
        ),
        kernel_flavour="gcp",
        os_images=MappingProxyType({
            "ubuntu-22.04": GceImage("ubuntu-os-cloud", "ubuntu-2204-lts"),
            "ubuntu-24.04": GceImage("ubuntu-os-cloud", "ubuntu-2404-lts-amd64"),
            "debian-12": GceImage("debian-cloud", "debian-12"),
        }),
        os_arches=_x86(*OS_NAMES),
        disk_types=MappingProxyType({"standard": "pd-standard", "balanced": "pd-balanced", "ssd": "pd-ssd"}),
        native_schemes=frozenset({"gs"}),
        secret_kinds=frozenset({"gcp"}),
        # Secret Manager secret ids: letters, digits, "_" and "-", at most 255
        secret_refs=(SecretRefForm(r"gcp/[A-Za-z0-9_-]{1,255}", "secret://gcp/NAME"),),
        ssh_default="open to any address (the default network's default-allow-ssh rule allows tcp:22 from 0.0.0.0/0)",
        lifecycle=LifecycleFacts(
            stop="the instance is stopped (TERMINATED)",
            delete="the instance and its boot disk are deleted",
            kept_billing="the boot disk keeps billing",
            enforces_max_run=True,
            guest_shutdown="stop",
            spot_reclaim=lambda on_max_run: (f"a preempted spot VM is {'deleted' if on_max_run == 'delete' else 'stopped (disk kept)'}, "
                                             "as on_max_run says"),
        ),
        nvswitch_shapes=r"^(a2-highgpu-8g|a2-megagpu-16g|a2-ultragpu-8g|a3-[a-z]+-8g|a4-highgpu-8g)$",
        group_engine=True,  # providers/gcp/group.py: compact resourcePolicies + one bulkInsert (count = minCount = N)
        # the script writes trainvm/status through the metadata server; the instance has enable-guest-attributes
        live_status="guest attribute trainvm/status",
        registry_login=RegistryLogin(
            title="Artifact Registry / Container Registry",
            hosts=r"[a-z0-9-]+-docker\.pkg\.dev|([a-z]+\.)?gcr\.io",
            login="gcp-token",
            needs="roles/artifactregistry.reader on the repository for the VM's service account, "
                  "and the cloud-platform or devstorage.read_only scope",
        ),
    ),
    CloudSpec(
        name="azure",
        title="Azure",
        provider="provisioner.providers.azure.provider:AzureProvider",
        request_builder="provisioner.providers.azure.request",
        price_source="provisioner.providers.azure.prices:fetch",
        quota_reader="provisioner.providers.azure.quota:reader",
        catalog_check="provisioner.providers.azure.offers:check_offer",
        baker="provisioner.providers.azure.bake:AzureBaker",  # Compute Gallery image version, replicated (docs/bake.md)
        family_of="provisioner.providers.azure.families:family",
        ready_estimate=ReadyEstimate(cold_s=1260, baked_s=170, source="public report cited in issue #28: 21 min cold "
                                     "install -> 2m50s from a gallery image on Azure"),
        credential_hint="Azure: set AZURE_SUBSCRIPTION_ID and run `az login`",
        user_data=UserDataFormat("azure-custom-data", "base64", 87_380, "base64 characters (64 KiB raw)"),
        payload=PayloadStoreFacts(
            title="Blob Storage",
            name="tvHASH22/trainvm in group trainvm-payload-{region}",
            url="https://tvHASH22.blob.core.windows.net/trainvm/{key}",
            access="Storage Blob Data Reader on the container for the VM's managed identity",
            metadata_url="http://169.254.169.254",
        ),
        kernel_flavour="azure",
        os_images=MappingProxyType({
            "ubuntu-22.04": AzureImage("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", "22_04-lts"),
            "ubuntu-24.04": AzureImage("Canonical", "ubuntu-24_04-lts", "server", "server-gen1"),
            "debian-12": AzureImage("Debian", "debian-12", "12-gen2", "12"),
        }),
        os_arches=_x86(*OS_NAMES),
        disk_types=MappingProxyType({"standard": "Standard_LRS", "balanced": "StandardSSD_LRS", "ssd": "Premium_LRS"}),
        native_schemes=frozenset({"az"}),
        secret_kinds=frozenset({"azure-keyvault"}),
        # Key Vault names: 3-24 letters, digits and "-"; secret names: 1-127 letters, digits and "-"
        secret_refs=(SecretRefForm(r"azure-keyvault/[A-Za-z0-9-]{3,24}/[A-Za-z0-9-]{1,127}",
                                   "secret://azure-keyvault/VAULT/NAME"),),
        ssh_default="closed (the VM's network security group allows no inbound traffic)",
        lifecycle=LifecycleFacts(
            stop="the VM is deallocated through Azure Resource Manager (a guest poweroff alone would keep billing)",
            delete="the VM, its OS disk, NIC and public IP are deleted through Azure Resource Manager",
            kept_billing="the OS disk and the Standard static public IP keep billing",
            enforces_max_run=False,
            guest_shutdown="keep-billing",
            spot_reclaim=lambda on_max_run: "an evicted spot VM is deleted with its disk (evictionPolicy Delete)",
        ),
        nvswitch_shapes=r"(?i)^standard_nd96",
        group_engine=True,  # providers/azure/group.py: a Uniform scale set (capacity N) in a proximity placement group
        registry_login=RegistryLogin(
            title="ACR",
            hosts=r"[a-z0-9]{5,50}\.azurecr\.io",
            login="acr",
            needs="AcrPull on the registry for the VM's managed identity",
        ),
        identity_check="provisioner.providers.azure.identity:check_identity",  # a user-assigned identity's ARM id
        identity_example="/subscriptions/SUB/resourceGroups/ops/providers/Microsoft.ManagedIdentity/userAssignedIdentities/trainvm-vms",
    ),
    CloudSpec(
        name="aws",
        title="AWS",
        provider="provisioner.providers.aws.provider:AwsProvider",
        request_builder="provisioner.providers.aws.request",
        price_source="provisioner.providers.aws.prices:fetch",
        quota_reader="provisioner.providers.aws.quota:reader",
        family_of="provisioner.providers.aws.families:family",
        credential_hint="AWS: run `aws configure` (or `aws sso login`, or set AWS_PROFILE)",
        user_data=UserDataFormat("ec2-user-data", "base64", 16_384, "bytes raw (before base64)"),
        payload=PayloadStoreFacts(
            title="S3",
            name="trainvm-ACCOUNT-{region}",
            url="https://trainvm-ACCOUNT-{region}.s3.{region}.amazonaws.com/{key}",
            access="s3:GetObject on the object for the instance profile",
            metadata_url="http://169.254.169.254",
        ),
        kernel_flavour="aws",
        os_images=MappingProxyType({
            "ubuntu-22.04": AmiParameter("/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id"),
            "ubuntu-24.04": AmiParameter("/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"),
            "debian-12": AmiParameter("/aws/service/debian/release/bookworm/latest/amd64"),
        }),
        os_arches=MappingProxyType({o: frozenset({"x86_64", "arm64"}) for o in OS_NAMES}),
        # EBS boot volume: gp3 always (st1/sc1 cannot be boot volumes; io1/io2 need Iops). "ssd" is gp3 with
        # provisioned IOPS and throughput (providers/aws/request.py sizes them)
        disk_types=MappingProxyType({"standard": "gp3", "balanced": "gp3", "ssd": "gp3"}),
        native_schemes=frozenset({"s3"}),
        secret_kinds=frozenset({"aws"}),
        # Secrets Manager names (1-512 of letters, digits and /_+=.@-), read in the VM's region, or a secret's ARN,
        # read in the ARN's own region
        secret_refs=(
            SecretRefForm(r"aws/[A-Za-z0-9/_+=.@-]{1,512}", "secret://aws/NAME (in the VM's region)"),
            SecretRefForm(r"aws/arn:aws(?:-cn|-us-gov)?:secretsmanager:[a-z]{2}(?:-[a-z]+)+-\d:\d{12}:secret:"
                          r"[A-Za-z0-9/_+=.@-]{1,512}", "secret://aws/ARN (the secret's ARN: read in its own region)"),
        ),
        ssh_default="closed (the VM's own security group allows no inbound traffic)",
        lifecycle=LifecycleFacts(
            stop="the instance is stopped (InstanceInitiatedShutdownBehavior=stop)",
            delete="the instance is terminated and its EBS root volume deleted (InstanceInitiatedShutdownBehavior=terminate)",
            kept_billing="the EBS root volume keeps billing",
            enforces_max_run=False,
            guest_shutdown="settable",  # InstanceInitiatedShutdownBehavior
            spot_reclaim=lambda on_max_run: "a reclaimed spot instance is terminated",
            self_delete="the instance terminates itself through its own EC2 TerminateInstances call (its shutdown "
                        "behaviour stays InstanceInitiatedShutdownBehavior=stop) and its EBS root volume is deleted",
        ),
        nvswitch_shapes=r"^(p4de?\.24xlarge|p5(e|en)?\.48xlarge|p6-b200\.48xlarge)$",
        group_engine=True,  # providers/aws/group.py: cluster placement group + one RunInstances (MinCount = MaxCount = N)
        vm_api_sdk="s3",
        baker="provisioner.providers.aws.bake:AwsBaker",  # AMI + CopyImage to the failover regions (docs/bake.md)
        registry_login=RegistryLogin(
            title="ECR",
            hosts=r"[0-9]{12}\.dkr\.ecr(-fips)?\.[a-z0-9-]+\.amazonaws\.com",
            login="ecr",
            needs="ecr:GetAuthorizationToken, and ecr:BatchGetImage and ecr:GetDownloadUrlForLayer on the repository, "
                  "for the instance profile (trainvm adds them)",
        ),
    ),
)})

CLOUD_NAMES: tuple[str, ...] = tuple(CLOUDS)
#: How the profile hash (profile/loader.py) spells a ``placement.clouds`` that the profile does not write:
#: the default set as it was when profile hashes were first made, frozen. The default set itself
#: (``CloudSpec.default``) may then grow (AWS joined it) without changing the hash of any profile, its
#: lock or the names of the VMs already made from it. Never edit this.
HASHED_DEFAULT_CLOUDS: tuple[str, ...] = ("gcp", "azure")

#: Schemes every cloud reads without any credential.
PUBLIC_SCHEMES: frozenset[str] = frozenset({"https"})


def cloud(name: str) -> CloudSpec:
    """The spec of ``name`` (KeyError for a cloud trainvm does not know; callers validate names first)."""
    return CLOUDS[name]


def provisionable_clouds() -> tuple[str, ...]:
    return tuple(n for n, c in CLOUDS.items() if c.provisionable)


def cluster_clouds() -> tuple[str, ...]:
    """The provisionable clouds whose provider creates multi-node clusters (``CloudSpec.group_engine``)."""
    return tuple(n for n, c in CLOUDS.items() if c.provisionable and c.group_engine)


def default_clouds() -> tuple[str, ...]:
    """The clouds a profile without ``placement.clouds`` is planned on."""
    return tuple(n for n, c in CLOUDS.items() if c.provisionable and c.default)


def priced_clouds() -> tuple[str, ...]:
    """The clouds ``catalog refresh`` can renew (a ``price_source``)."""
    return tuple(n for n, c in CLOUDS.items() if c.price_source is not None)


def provisionable(name: str) -> bool:
    spec = CLOUDS.get(name)
    return spec is not None and spec.provisionable


def providers() -> dict[str, str]:
    """cloud -> "module:Class" of its provider, for the provisionable clouds."""
    return {n: c.provider for n, c in CLOUDS.items() if c.provider is not None}




def unknown_cloud_message(name: str) -> str:
    return f"unknown cloud {name!r} (choose {or_list(CLOUD_NAMES)})"


def credential_hint(names: tuple[str, ...] | None = None) -> str:
    """How to give trainvm credentials for ``names`` (default: every provisionable cloud)."""
    return "; ".join(CLOUDS[n].credential_hint for n in (names or provisionable_clouds()))


def image_ref(name: str, os_name: str) -> ImageRef | None:
    spec = CLOUDS.get(name)
    return None if spec is None else spec.os_images.get(os_name)


def image_refs(os_name: str) -> dict[str, dict[str, str]]:
    """cloud -> the image reference of ``os_name`` there (the lock file records them), sorted by cloud."""
    return {n: c.os_images[os_name].lock_ref() for n, c in sorted(CLOUDS.items()) if os_name in c.os_images}


def os_arches() -> dict[str, Mapping[str, frozenset[str]]]:
    """cloud -> os -> architectures with a published image (the planner's os_image filter)."""
    return {n: c.os_arches for n, c in CLOUDS.items()}


# Back-compatible views (data locality, plan, up's summary)
SSH_DEFAULT: Mapping[str, str] = MappingProxyType({n: c.ssh_default for n, c in CLOUDS.items()})
NATIVE_SCHEMES: Mapping[str, frozenset[str]] = MappingProxyType({n: c.native_schemes for n, c in CLOUDS.items()})


def load(ref: str) -> Any:
    """A ``"module:name"`` field of a ``CloudSpec``, imported now."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def identity_examples() -> dict[str, str]:
    """cloud -> an example ``placement.identity`` value, for the clouds that take one (the profile model's example)."""
    return {c.name: c.identity_example for c in CLOUDS.values() if c.identity_example}


def check_identity(cloud: str, value: str) -> str:
    """``placement.identity.CLOUD``: the cloud's own check of a pre-made VM identity (ValueError when refused)."""
    spec = CLOUDS[cloud]
    if spec.identity_check is None:
        takes = or_list(tuple(c.name for c in CLOUDS.values() if c.identity_check))
        raise ValueError(f"{cloud}: trainvm uses a pre-made VM identity only on {takes}")
    return str(load(spec.identity_check)(value))


def secret_kind(ref: str) -> str:
    """``secret://KIND/...`` -> KIND."""
    return ref[len("secret://"):].split("/", 1)[0]


def ssh_exposure(cloud: str, ssh_from: str | None) -> str:
    if ssh_from:
        return f"only from {ssh_from}"
    return SSH_DEFAULT.get(cloud, "as the cloud's defaults allow")


def reads_natively(cloud: str, scheme: str) -> bool:
    return scheme in PUBLIC_SCHEMES or scheme in NATIVE_SCHEMES.get(cloud, frozenset())


def native_clouds(scheme: str) -> tuple[str, ...]:
    return tuple(sorted(c for c, schemes in NATIVE_SCHEMES.items() if scheme in schemes))


def placement(cloud: str, family: str, instance_type: str) -> ShapePlacement:
    """Multi-node facts of one shape (data/placement.yaml): compact placement, fabric, what the guest
    needs to use the fabric."""
    from provisioner.providers.placement import shape_placement  # lazy: startup

    return shape_placement(cloud, family, instance_type)


#: The longest value one instance metadata item / tag may hold: GCE metadata values 256 KiB; Azure and
#: AWS tag values 256 characters. A cluster's node list is split into items of at most this size.
METADATA_VALUE_LIMIT: Mapping[str, int] = MappingProxyType({"gcp": 262_144, "azure": 256, "aws": 256})


def compactable_families(clouds: tuple[str, ...]) -> frozenset[tuple[str, str]]:
    """(cloud, family) pairs whose nodes the cloud can place compactly (data/placement.yaml)."""
    from provisioner.providers.placement import compactable  # lazy: startup

    return compactable(clouds)


def bakers() -> dict[str, str]:
    """cloud -> "module:Class" of its Baker, for the clouds that can bake."""
    return {c.name: c.baker for c in CLOUDS.values() if c.baker}
