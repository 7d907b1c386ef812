"""``trainvm images`` / ``trainvm images delete NAME``: the baked images (docs/bake.md) of every cloud that can bake
and has credentials (or of ``--cloud``), rebuilt from the clouds' own image labels (no local state)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypedDict

from provisioner.bake import records
from provisioner.bake.cost import StorageDoc, monthly_cost
from provisioner.bake.run import baker_for
from provisioner.catalog.storage import load_catalog
from provisioner.commands.clouds import providers_for
from provisioner.errors import InputError
from provisioner.hooks import bakers
from provisioner.output import emit_json, stdout_console
from provisioner.providers.image_identity import LABEL_PROFILE, LABEL_STACK
from provisioner.wording import plural

if TYPE_CHECKING:
    from provisioner.catalog.disks import DiskPrices
    from provisioner.providers.bake_base import BakedImage, Baker
    from provisioner.providers.base import Provider


def _bakers(cloud: str | None, providers: dict[str, Provider] | None = None) -> dict[str, Baker]:
    if cloud is not None and cloud not in bakers():
        baker_for(cloud)  # the "cannot bake on this cloud yet" error
    providers = providers_for(cloud) if providers is None else providers
    return {c: baker_for(c, p) for c, p in providers.items() if c in bakers()}


def age_days(created: str, now: datetime | None = None) -> float | None:
    """Days since ``created`` (RFC 3339), None when the cloud gave no time."""
    if not created:
        return None
    try:
        when = datetime.fromisoformat(created)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return round(((now or datetime.now(UTC)) - when).total_seconds() / 86400, 1)


class ImageDoc(TypedDict):
    """One image of ``trainvm images --json`` (``image_line`` reads it back)."""

    name: str
    cloud: str
    family: str
    status: str
    profile: str | None
    stack: str | None
    size_gib: float | None
    created: str
    age_days: float | None
    regions: list[str]
    ref: str
    storage: StorageDoc


def image_doc(image: BakedImage, prices: DiskPrices) -> ImageDoc:
    return {"name": image.name, "cloud": image.cloud, "family": image.family, "status": image.status,
            "profile": image.labels.get(LABEL_PROFILE), "stack": image.labels.get(LABEL_STACK),
            "size_gib": image.size_gib, "created": image.created, "age_days": age_days(image.created),
            "regions": list(image.regions), "ref": image.ref, "storage": monthly_cost(image, prices)}


def image_line(d: ImageDoc) -> str:
    """One image of ``trainvm images`` (an ``image_doc``) as a line of text."""
    size = f"{d['size_gib']:g} GiB" if d["size_gib"] is not None else "size unknown"
    age = f"{d['age_days']:g} days old" if d["age_days"] is not None else "age unknown"
    cost = d["storage"]["monthly"]
    month = f"${cost:.2f}/month stored" if cost is not None else "storage $/month unknown"
    if cost == 0 and d["storage"]["source"]:  # an image on this machine (CloudSpec.on_host): say whose disk
        month += f" ({d['storage']['source']})"
    return (f"{d['name']}  {d['cloud']}  profile {d['profile'] or '?'}  stack {d['stack'] or '?'}  {size}  {age}  "
            f"stored in {', '.join(d['regions']) or '?'}  {month}  {d['status']}")


def run_images(*, cloud: str | None, json_out: bool, profile: str | None = None) -> int:
    prices = load_catalog().disk_prices
    if profile is not None:
        from provisioner.commands.images_profile import run_images_profile  # lazy: cycle (it imports this module)

        providers = providers_for(cloud)
        return run_images_profile(profile, cloud=cloud, json_out=json_out, prices=prices,
                                  bakers=_bakers(cloud, providers), providers=providers)
    listed = {c: b.images() for c, b in _bakers(cloud).items()}
    for c, images in listed.items():  # the local record of bakes (plan's offline answer) follows the cloud
        records.replace_cloud(c, images)
    docs = [image_doc(i, prices) for images in listed.values() for i in images]
    if json_out:
        emit_json({"images": docs})
        return 0
    out = stdout_console()
    if not docs:
        out.print("no baked images")
        return 0
    for d in docs:
        out.print(image_line(d), markup=False, highlight=False)
    known = [d["storage"]["monthly"] for d in docs if d["storage"]["monthly"] is not None]
    if known:
        unknown = len(docs) - len(known)
        out.print(f"{plural(len(docs), 'image')}: ${sum(known):.2f}/month of storage" + (f" (+{unknown} unknown)" if unknown else "")
                  + " until `trainvm images delete NAME`", markup=False, highlight=False)
    return 0


def run_images_delete(name: str, *, cloud: str | None, json_out: bool) -> int:
    if not name or "/" in name:
        raise InputError(f"images delete: {name!r} is not an image name")

    deleted = [c for c, b in _bakers(cloud).items() if b.delete_image(name)]
    for c in deleted:
        records.remove(c, name)
    if json_out:
        emit_json({"name": name, "deleted": bool(deleted), "clouds": deleted})
    else:
        stdout_console().print(f"{name}: deleted on {', '.join(deleted)}" if deleted else f"{name}: no such baked image",
                               markup=False, highlight=False)
    return 0 if deleted else 4
