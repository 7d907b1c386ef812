"""What a provider can do beyond the ``Provider`` contract (providers/base.py), as typed interfaces.

Code outside ``providers/`` asks ``isinstance(provider, ImagePinner)`` instead of probing for a method by
name, and each provider class names the interfaces it implements among its bases, so mypy checks its
methods against them (a missing or mistyped method is a type error, not a silent "cannot"). A fourth
cloud implements what it can; a command that needs a capability it lacks says so.

What is known offline (plan and render import no provider, hence no SDK) stays a fact of the registry's
``CloudSpec`` (``group_engine``, ``live_status``) or a cloud's typed hooks (provisioner/hooks/: ``baker``,
``quota_reader``): those are decided before any provider exists. The interfaces here are the ones asked of a
provider object at ``up``, ``verify`` and
``lock`` time.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict, runtime_checkable

if TYPE_CHECKING:
    from provisioner.profile.model import Profile
    from provisioner.providers.base import InstanceRecord
    from provisioner.providers.stack_report import StackReport


@runtime_checkable
class ImagePinner(Protocol):
    """Resolves an OS image family / URN / SSM parameter to the exact image now (``trainvm lock`` pins it)."""

    def pin_image(self, os_name: str) -> dict[str, str]:
        """The image ``os_name`` resolves to today, as the lock file records it (e.g. ``{"image": ...}``)."""
        ...


class PreflightResult(TypedDict):
    """What a preflight found (``up`` prints it and puts it in its JSON summary)."""

    cloud: str
    status: Literal["ok", "unchecked"]
    message: str


@runtime_checkable
class Preflighter(Protocol):
    """Checks, before anything is created, what the cloud would refuse late (``up`` runs it once per cloud)."""

    def preflight(self, profile: Profile, name: str, regions: builtins.list[str]) -> PreflightResult:
        """``{cloud, status: ok|unchecked, message}``; a refusal raises (exit 3)."""
        ...


@runtime_checkable
class PartialLister(Protocol):
    """Lists every zone or region on its own, so that one that does not answer leaves the others' VMs listed
    (``list``/``status`` then say the answer is partial and name what was not listed)."""

    def list_partial(self) -> tuple[builtins.list[InstanceRecord], builtins.list[str]]:
        """The trainvm VMs found (as ``list()``) and the zones/regions that could not be listed."""
        ...


@runtime_checkable
class ClusterReader(Protocol):
    """Reads a multi-node cluster's nodes and their reports (``verify`` of a cluster, ``up``'s summary)."""

    def cluster_nodes(self, name: str) -> builtins.list[InstanceRecord]:
        """The nodes of cluster ``name`` in rank order ([] when there is no such cluster)."""
        ...

    def read_cluster_reports(self, name: str) -> dict[str, StackReport | None]:
        """Every node's latest TRAINVM_REPORT, keyed by node name, rank order (None: no report yet)."""
        ...


@runtime_checkable
class LocalSsdBuilder(Protocol):
    """The local SSD facts module (the cloud's ``local_ssd`` hook, provisioner/hooks/) of a cloud that attaches local SSD
    as separate disks of a fixed size (GCE): the disk count for a requested scratch size, and the families whose machine type brings its
    own (bundled) local SSD. A cloud without one attaches one scratch disk of the requested size, or none."""

    LOCAL_SSD_DISK_GIB: int
    BUNDLED_LOCAL_SSD: frozenset[str]

    def local_ssd_count(self, instance_type: str, gib: int) -> int:
        ...
