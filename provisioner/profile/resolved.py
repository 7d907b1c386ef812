"""Resolve once (issue 26): everything derived from a validated profile, computed in one place.

``resolve(profile)`` is the only function that derives these facts; ``LoadedProfile.resolved`` calls it once
per loaded profile (a cached property: a ``dataclasses.replace`` with another profile resolves again). plan,
render, provision and verify read the record and never derive the same fact again:

* the stack context (``compat.rules.StackContext``: the pinned frameworks, the effective CUDA, the driver);
* the effective CUDA (``compat.stack.effective_cuda``: ``stack.cuda``, else the first framework build's);
* the GPUs the stack cannot run on (name -> first reason), what the planner excludes;
* the container image reference, parsed once (None without ``stack.container``);
* placement decisions (clouds, regions, spot, compact placement) and lifecycle decisions;
* the data sources (URL, credential) the planner's data-locality check reads.

Pure and offline (no cloud SDK): the container facts come from the local image store.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, Mapping

from provisioner.compat import rules as compat_rules  # called through the module: tests count rules.stack_context
from provisioner.compat.facts import load_facts
from provisioner.providers.registry import placement

if TYPE_CHECKING:
    from provisioner.compat.facts import Facts
    from provisioner.compat.rules import StackContext
    from provisioner.compat.stack import Framework
    from provisioner.container.image import ImageFacts
    from provisioner.container.reference import ImageRef
    from provisioner.profile.messages import Message
    from provisioner.profile.model import Profile

Action = Literal["stop", "delete"]


@dataclass(frozen=True, slots=True)
class PlacementDecisions:
    """Where the VM may run and how, as the profile decides it (command-line overrides apply in the planner)."""

    clouds: tuple[str, ...]
    regions: tuple[str, ...] | None
    spot: bool
    nodes: int
    #: placement.compact as written: True / False, or None (omitted: compact where the shape supports it)
    compact_asked: bool | None
    #: nodes > 1 and placement.compact: true: the planner keeps only families that can be placed compactly
    compact_required: bool
    max_price_per_hour: float | None
    max_failover_premium: float
    #: placement.ssh_from: the CIDR allowed to SSH in (None: the cloud's default; ``--ssh-from`` overrides it)
    ssh_from: str | None = None

    def compact_for(self, cloud: str, family: str, instance_type: str) -> bool:
        """Whether the nodes on this shape are placed compactly: as asked, or (omitted) where the family supports
        it; always False for one node."""
        if self.nodes == 1:
            return False
        if self.compact_asked is not None:
            return self.compact_asked

        return bool(placement(cloud, family, instance_type).compact)


@dataclass(frozen=True, slots=True)
class LifecycleDecisions:
    """What ends or stops the VM (billing): the watchdog's and the run limit's rules."""

    idle_shutdown_minutes: int | None
    max_run_hours: float | None
    on_idle: Action
    on_max_run: Action
    #: the actions a rule that is on may take (on_idle when idle_shutdown_minutes is set, on_max_run with max_run_hours)
    actions_used: tuple[Action, ...]


@dataclass(frozen=True, slots=True)
class Resolved:
    stack: StackContext
    cuda: str | None
    frameworks: tuple[Framework, ...]
    #: GPU name -> why the stack cannot run there (cloud GPUs only; the planner's ``stack_incompatible``)
    gpu_exclusions: Mapping[str, str]
    image: ImageRef | None
    #: the image's facts (CUDA, cuDNN, framework, arch list, size) from the local store, None when not known offline
    container_facts: ImageFacts | None
    #: what looking them up said (a tag without a digest, facts not known offline...): validate's warnings
    container_notes: tuple[Message, ...]
    placement: PlacementDecisions
    lifecycle: LifecycleDecisions
    #: (source URL, data[].credential or None) per data item, in profile order
    data_sources: tuple[tuple[str, str | None], ...]

    @property
    def framework(self) -> Framework | None:
        """The first CUDA-using framework among the pins (None: none pinned)."""
        return self.frameworks[0] if self.frameworks else None


def resolve(profile: Profile, facts: Facts | None = None) -> Resolved:
    """The record of ``profile`` (validated): the one place these facts are derived."""
    facts = facts or load_facts()
    stack = profile.stack
    ctx = compat_rules.stack_context(stack, facts)
    image: ImageRef | None = None
    known: ImageFacts | None = None
    notes: tuple[Message, ...] = ()
    exclusions: dict[str, str]
    if stack.container is not None:
        from provisioner.compat.container import container_gpu_exclusions  # lazy: startup
        from provisioner.container.reference import parse_image_ref  # lazy: startup
        from provisioner.container.store import (
            image_facts,  # lazy: startup (a profile without a container never loads the store)
        )

        image = parse_image_ref(stack.container.image)
        known, said = image_facts(stack.container.image, image)
        notes = tuple(said)
        exclusions = {n: ms[0].message for n, ms in container_gpu_exclusions(stack, facts, (known, notes)).items() if ms}
    else:
        exclusions = compat_rules.gpu_exclusions(stack, facts, ctx)
    pl, lc, nodes = profile.placement, profile.lifecycle, profile.hardware.nodes
    used = tuple(a for a, on in ((lc.on_idle, lc.idle_shutdown_minutes), (lc.on_max_run, lc.max_run_hours)) if on)
    return Resolved(
        stack=ctx,
        cuda=ctx.cuda,
        frameworks=ctx.frameworks,
        gpu_exclusions=MappingProxyType(exclusions),
        image=image,
        container_facts=known,
        container_notes=notes,
        placement=PlacementDecisions(
            clouds=tuple(pl.clouds), regions=tuple(pl.regions) if pl.regions else None, spot=pl.spot, nodes=nodes,
            compact_asked=pl.compact, compact_required=nodes > 1 and bool(pl.compact),
            max_price_per_hour=pl.max_price_per_hour, max_failover_premium=pl.max_failover_premium,
            ssh_from=pl.ssh_from),
        lifecycle=LifecycleDecisions(lc.idle_shutdown_minutes, lc.max_run_hours, lc.on_idle, lc.on_max_run, used),
        data_sources=tuple((d.source, d.credential) for d in profile.data),
    )
