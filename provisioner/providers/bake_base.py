"""The ``Baker`` capability (``trainvm bake`` / ``trainvm images``, docs/bake.md): what a cloud must do to capture,
find and delete baked images. Registered per cloud as its ``baker`` hook (provisioner/hooks/, typed
``BakerFactory``: built from that cloud's provider); a cloud without one cannot bake yet. Nothing here imports a cloud SDK."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from provisioner.providers.base import InstanceRecord, Provider
    from provisioner.providers.image_identity import ImageIdentity
    from provisioner.providers.offer import Offer


@dataclass(frozen=True)
class BakedImage:
    """A baked image as the cloud reports it."""

    name: str  # GCE image name, AMI id, Azure gallery image version id
    cloud: str
    ref: str  # what a create request boots (GCE: projects/P/global/images/NAME)
    labels: dict[str, str]
    created: str = ""
    size_gib: float | None = None  # stored size (GCE archiveSizeBytes), None when the cloud does not say
    regions: tuple[str, ...] = ()  # where it is stored / replicated
    family: str = ""
    status: str = ""
    #: (region, what a create request boots there) where each region holds its own copy (AWS: one AMI id per region)
    region_refs: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default=())
    #: stored copies the cloud bills for, where it says (Azure: the replicas over all target regions); None: see copies
    replicas: int | None = None

    @property
    def copies(self) -> int:
        """Stored copies billed each month: ``replicas`` where given, else one per region holding its own copy
        (``region_refs``: AWS, one AMI and its snapshots per region), else one (GCE: one multi-regional image)."""
        return self.replicas or len(self.region_refs) or 1


class Baker(Protocol):
    """One cloud's image capture. The builder VM itself is created, watched, stopped and deleted through the
    cloud's ``Provider`` (the same calls, retries and cleanup as ``up``)."""

    @property
    def provider(self) -> Provider:
        """The cloud's provider the builder VM is created, watched, stopped and deleted through (read-only: a cloud's
        Baker may hold its own provider class, e.g. AzureBaker the AzureProvider whose client it uses)."""
        ...

    #: the small CPU shape the builder runs on (no GPU: the driver's module is built by DKMS without one)
    builder_shape: str

    def builder_offer(self, gpu_offer: Offer) -> Offer:
        """The builder's offer: ``gpu_offer``'s location with ``builder_shape`` and no GPU."""
        ...

    def base_image(self, os_name: str, locked: dict[str, str] | None, region: str | None = None) -> str:
        """The OS image a builder (and a VM) of ``os_name`` boots now in ``region`` (the builder's): the lock's pin,
        else the family's current one."""
        ...

    def capture(self, builder: InstanceRecord, identity: ImageIdentity, profile_name: str,
                regions: tuple[str, ...] = ()) -> BakedImage:
        """Make the image from the stopped builder's boot disk, labelled with ``identity``; wait until it is ready.
        ``regions``: the cloud's regions of the profile's failover order (the builder's first), where a cloud with
        regional images copies/replicates it. What the capture made is deleted when it fails or is interrupted."""
        ...

    def images(self) -> list[BakedImage]:
        """Every trainvm baked image of the account/project."""
        ...

    def find(self, identity: ImageIdentity) -> BakedImage | None:
        """The newest ready baked image whose labels match ``identity`` exactly, else None."""
        ...

    def delete_image(self, name: str) -> bool:
        """Delete one baked image (False: there was none of that name)."""
        ...
