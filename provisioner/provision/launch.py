"""From a plan's offer to what a provider receives: the payload the render stage made for that offer's cloud and
shape (render/script.py ``render_for_offer``), staged in the cloud's payload store (providers/store.py), and the
``LaunchSpec`` (names, labels, the resolved profile as JSON, the bootstrap that fetches the payload). ``up``
renders once per offer it tries and hands the render here: the provision stage never renders."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.canonical import canonical_json
from provisioner.catalog.costs import cost_of
from provisioner.catalog.models import Offer
from provisioner.catalog.storage import load_catalog
from provisioner.profile import LoadedProfile
from provisioner.providers.base import LaunchSpec, Provider, SecretRef, labels_for, vm_name
from provisioner.providers.image_identity import label_value
from provisioner.providers.offer import Shape
from provisioner.providers.store import PayloadRef

if TYPE_CHECKING:
    from provisioner.catalog.costs import Cost
    from provisioner.catalog.disks import DiskPrices
    from provisioner.providers.bake_base import BakedImage
    from provisioner.render.script import RenderedScript


def stage(rendered: RenderedScript, offer: Offer | Shape, provider: Provider) -> PayloadRef:
    """Stage the payload of ``rendered`` (the render for ``offer``) in the offer's region of the cloud's payload store
    (an upload only when that store does not hold it yet): what ``up`` does once per offer it tries."""
    return provider.payload_store().stage(offer.region, rendered.payload.data, rendered.payload.sha256)


def disk_costs(loaded: LoadedProfile, offer: Offer, disk_prices: DiskPrices | None = None) -> Cost:
    """What the profile's disks cost per node on ``offer`` (``disk_prices``: the plan's, i.e. the catalog it was
    computed over; the catalog is loaded only without them), recorded on the VM so that ``status``/``list`` show
    its running and stopped $/h."""
    hw = loaded.profile.hardware
    return cost_of(offer, disk_prices=disk_prices if disk_prices is not None else load_catalog().disk_prices, boot_disk_type=hw.boot_disk.type,
                   boot_disk_gib=hw.boot_disk.size_gib, local_nvme_gib=hw.local_nvme_gib)


def resolved_profile_json(loaded: LoadedProfile) -> str:
    """The resolved profile stored on the VM; with a lock, also the team source commits it was built
    from and every locked package (so ``verify`` judges the whole closure)."""
    data = loaded.profile.model_dump(mode="json", exclude={"extends"})
    if loaded.sources:
        data["sources"] = [s.record() for s in loaded.sources]
    if loaded.lock is not None and loaded.lock_path is not None:
        from provisioner.lock.model import file_sha256  # lazy: startup

        data["lock"] = {"sha256": file_sha256(loaded.lock_path), "packages": loaded.lock.versions()}
    return canonical_json(data)


def launch_spec(loaded: LoadedProfile, offer: Offer, *, rendered: RenderedScript, name: str | None = None,
                spot: bool | None = None, ssh_from: str | None = None, ref: PayloadRef | None = None,
                cost: Cost | None = None, price: float | None = None, baked: BakedImage | None = None) -> LaunchSpec:
    """The create request's inputs for ``offer``, rendered for it (``rendered``: render/script.py
    ``render_for_offer``). With ``ref`` (the staged payload, ``stage``) the user data is the bootstrap that fetches
    it; without, the bootstrap ``render``/``plan`` show for review (the store's account part a placeholder), which is
    never sent. ``up`` hands the plan's figures (its request's spot, with the command line's overrides, and ``cost``:
    ``Plan.cost``, over the catalog it ranked with): nothing is derived again here; without a cost (``render``,
    ``bake``) the disks' prices come from the catalog. The price is the offer's that applies (``Plan.price``).
    ``spot``/``ssh_from``: the command line's overrides, else the profile's record. ``price``: the plan's price that
    applies (``Candidate.price``), else the offer's. ``baked``: the baked image the VM boots (bake/use.py's choice for
    this offer), its name on the ``trainvm-baked`` label."""
    p, placement, lifecycle = loaded.profile, loaded.resolved.placement, loaded.resolved.lifecycle
    user_data = rendered.user_data(ref) if ref is not None else rendered.preview()
    if spot is None:
        spot = placement.spot
    if price is None:
        price = offer.price_that_applies(spot)
    disks = cost if cost is not None else disk_costs(loaded, offer)
    labels = labels_for(p.name, loaded.hash, price, rendered.payload.sha256, disks_hourly=disks.disks_hourly,
                        kept_hourly=disks.stopped_hourly)
    if baked is not None:
        labels = {**labels, "trainvm-baked": label_value(baked.name)}
    return LaunchSpec(
        name=vm_name(p.name, loaded.hash, name),
        profile_name=p.name,
        profile_hash=loaded.hash,
        profile_json=resolved_profile_json(loaded),
        labels=labels,
        startup_script=rendered.startup_sh,
        user_data=user_data.text,  # the bootstrap; the request carries it as the cloud wants (registry UserDataFormat)
        os=p.stack.os,
        boot_disk_type=p.hardware.boot_disk.type,
        boot_disk_gib=p.hardware.boot_disk.size_gib,
        local_nvme_gib=p.hardware.local_nvme_gib,
        spot=spot,
        max_price_per_hour=placement.max_price_per_hour,
        max_run_hours=lifecycle.max_run_hours,
        ssh_from=ssh_from or placement.ssh_from,
        data_sources=tuple(d.source for d in p.data),
        price_hourly=price,
        idle_shutdown_minutes=lifecycle.idle_shutdown_minutes,
        on_idle=lifecycle.on_idle,
        on_max_run=lifecycle.on_max_run,
        locked_images=locked_images(loaded),
        nodes=placement.nodes,
        compact=resolved_compact(loaded, offer),
        payload=ref,
        secret_refs=secret_refs(loaded),
        image=loaded.resolved.image,
        registry_auth=p.stack.container.registry_auth if p.stack.container is not None else None,
        identity=dict((p.placement.identity or {}).items()),
        boot_image=baked.ref if baked is not None else None,
    )


def secret_refs(loaded: LoadedProfile) -> tuple[SecretRef, ...]:
    """Every ``secret://`` reference the VM resolves: the profile's references (``LoadedProfile.secret_refs``: every
    field whose value is one, e.g. ``stack.env``, ``stack.container.registry_auth``) and the data credentials."""
    refs = {ref for _, ref in loaded.secret_refs}
    refs |= {d.credential for d in loaded.profile.data if d.credential and d.credential.startswith("secret://")}
    return tuple(sorted(SecretRef.parse(r) for r in refs))


def resolved_compact(loaded: LoadedProfile, offer: Offer) -> bool:
    """placement.compact for ``offer`` as the plan resolves it: as asked, or (omitted) where the family supports
    it; always False for one node."""
    return loaded.resolved.placement.compact_for(offer.cloud, offer.family, offer.instance_type)


def locked_images(loaded: LoadedProfile) -> dict[str, dict[str, str]]:
    """The images a fresh NAME.lock pinned (clouds it could not resolve are left out)."""
    if loaded.lock is None or loaded.lock_state != "fresh":
        return {}
    return {cloud: dict(facts) for cloud, facts in loaded.lock.images.items() if not facts.get("unresolved")}
