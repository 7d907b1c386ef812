"""The table of clouds trainvm knows (``CLOUDS``: one ``CloudSpec`` each, providers/cloud_spec.py); everything
outside ``providers/`` asks providers/registry.py, which reads this table, instead of branching on a cloud's
name. Pure data: importing it imports no SDK.

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
* ``local`` (``rehearsal``, not a default cloud): a QEMU VM on this machine (providers/local/). Its one offer is a
  fact of the host read at plan time (its ``host_offers`` hook, providers/local/host.py), not a catalog row. The
  bootstrap is cloud-init NoCloud user data, a ``user-data`` file on a ``cidata`` volume the VM reads as a disk:
  no API limit; the limit below is ISO 9660's largest single-extent file (2**32 - 1 bytes) of the seed image
  (https://cloudinit.readthedocs.io/en/latest/reference/datasources/nocloud.html). Base images: the official
  Debian (https://cloud.debian.org/images/cloud/, ``genericcloud``) and Ubuntu (https://cloud-images.ubuntu.com/)
  qcow2 cloud images, which trainvm cannot pin by checksum offline: the user downloads one, checks it against
  the publisher's signed SHA512SUMS / SHA256SUMS, and names the file in a setting (``TRAINVM_LOCAL_IMAGE_*``).
* what a VM can read (data locality, secret stores) and what a cross-cloud copy costs: providers/access.py
  (egress prices: data/egress.yaml, each with its source and whether it was checked).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from provisioner.providers.cloud_spec import (
    OS_NAMES,
    AmiParameter,
    AzureImage,
    CloudSpec,
    GceImage,
    LifecycleFacts,
    LocalImage,
    PayloadStoreFacts,
    ReadyEstimate,
    RegistryLogin,
    SecretRefForm,
    UserDataFormat,
)


def _x86(*names: str) -> Mapping[str, frozenset[str]]:
    return MappingProxyType({o: frozenset({"x86_64"}) for o in names})


CLOUDS: Mapping[str, CloudSpec] = MappingProxyType({c.name: c for c in (
    CloudSpec(
        name="gcp",
        title="GCE",
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
            # "Stopped: ... the VM is still allocated ... billed for compute"; "Stopping" bills too; only
            # "Deallocated" ends compute billing (learn.microsoft.com/azure/virtual-machines/states-billing)
            allocated_states=frozenset({"STOPPED", "STOPPING"}),
        ),
        nvswitch_shapes=r"(?i)^standard_nd96",
        group_engine=True,  # providers/azure/group.py: a Uniform scale set (capacity N) in a proximity placement group
        registry_login=RegistryLogin(
            title="ACR",
            hosts=r"[a-z0-9]{5,50}\.azurecr\.io",
            login="acr",
            needs="AcrPull on the registry for the VM's managed identity",
        ),
        identity_example="/subscriptions/SUB/resourceGroups/ops/providers/Microsoft.ManagedIdentity/userAssignedIdentities/trainvm-vms",
    ),
    CloudSpec(
        name="aws",
        title="AWS",
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
        registry_login=RegistryLogin(
            title="ECR",
            hosts=r"[0-9]{12}\.dkr\.ecr(-fips)?\.[a-z0-9-]+\.amazonaws\.com",
            login="ecr",
            needs="ecr:GetAuthorizationToken, and ecr:BatchGetImage and ecr:GetDownloadUrlForLayer on the repository, "
                  "for the instance profile (trainvm adds them)",
        ),
    ),
    CloudSpec(
        name="local",
        title="this machine (QEMU)",
        credential_hint="local: install qemu-system-x86, qemu-utils and genisoimage (Debian packages)",
        user_data=UserDataFormat("nocloud-user-data", "plain", 4_294_967_295,
                                 "bytes (no API limit: a file on the cidata seed volume, ISO 9660)"),
        payload=PayloadStoreFacts(
            title="content-addressed store on this machine",
            name="$XDG_STATE_HOME/trainvm/local/store",
            url="http://10.0.2.100/{key}",
            access="served only to the VM whose record names the object, through its own QEMU guestfwd channel "
                   "(no credential in user data)",
            metadata_url="http://10.0.2.100",
            expires=False,  # providers/local/store.py: no lifecycle rule; `down` releases what no other VM names
            billed=False,
            reads="read by the VM through its own endpoint (its QEMU guestfwd channel, no credential)",
        ),
        kernel_flavour="generic",
        os_images=MappingProxyType({
            "debian-12": LocalImage("TRAINVM_LOCAL_IMAGE_DEBIAN_12", "https://cloud.debian.org/images/cloud/bookworm/"),
            "ubuntu-22.04": LocalImage("TRAINVM_LOCAL_IMAGE_UBUNTU_22_04", "https://cloud-images.ubuntu.com/jammy/"),
            "ubuntu-24.04": LocalImage("TRAINVM_LOCAL_IMAGE_UBUNTU_24_04", "https://cloud-images.ubuntu.com/noble/"),
        }),
        os_arches=_x86(*OS_NAMES),
        # the boot disk is a qcow2 overlay in the VM's folder, whatever the profile's type
        disk_types=MappingProxyType({"standard": "qcow2", "balanced": "qcow2", "ssd": "qcow2"}),
        # QEMU on this machine; the boot disk overlay and the NVMe devices are files in the VM's folder (request.py)
        on_host="this machine's own CPUs, memory and disk: no bill",
        native_schemes=frozenset(),
        secret_kinds=frozenset(),
        secret_refs=(),
        ssh_default="this machine only (QEMU user networking forwards a port of 127.0.0.1 to the VM's port 22)",
        lifecycle=LifecycleFacts(
            stop="the VM is powered off (ACPI power-off through QEMU's monitor; QEMU exits, the disk stays)",
            delete="the VM's QEMU is ended and its folder (disk overlay, seed, console log) removed",
            kept_billing="the disk overlay keeps its space on this machine, and nothing keeps billing",
            enforces_max_run=False,
            guest_shutdown="stop",  # a poweroff inside the guest ends QEMU: the VM is stopped, its disk kept
            spot_reclaim=lambda on_max_run: "this machine has no spot VMs",
        ),
        nvswitch_shapes=r"(?!)",  # no GPU
        # the script PUTs its status to the VM's endpoint (providers/local/endpoint.py), kept in the VM's folder
        live_status="the VM endpoint's status/status",
        default=False,
        rehearsal=True,
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
