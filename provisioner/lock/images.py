"""The exact OS image per cloud for NAME.lock: what ``up`` would otherwise resolve when it creates the VM
(GCE: the image the family points to; Azure: the Marketplace version; AWS: the AMI id).

Resolution asks each cloud through its provider (``pin_image``), so it needs that cloud's credentials;
a cloud without them, or without a provider, keeps only the reference, with ``unresolved`` saying why,
and ``up`` resolves it at create time as before. ``TRAINVM_LOCK_IMAGES=0`` skips the clouds entirely
(the test suite's default: it never talks to a real cloud)."""

from __future__ import annotations

from provisioner import settings
from provisioner.errors import TrainvmError
from provisioner.hooks.providers import get_provider, provider_clouds
from provisioner.providers.capabilities import ImagePinner
from provisioner.providers.registry import image_refs


def resolve_images(os_name: str) -> dict[str, dict[str, str]]:
    """cloud -> reference + pinned facts (or ``unresolved``: why not)."""

    ask = settings.text("TRAINVM_LOCK_IMAGES", "1") != "0"
    out: dict[str, dict[str, str]] = {}
    for cloud, ref in image_refs(os_name).items():
        entry = dict(ref)
        if not ask:
            entry["unresolved"] = "not asked (TRAINVM_LOCK_IMAGES=0); `up` resolves the reference when it creates the VM"
        elif cloud not in provider_clouds():
            entry["unresolved"] = "trainvm has no provider for this cloud yet; the cloud resolves the reference when the VM is created"
        else:
            try:
                provider = get_provider(cloud)
            except TrainvmError as exc:
                entry["unresolved"] = f"no credentials when locked ({str(exc).splitlines()[0]}); `up` resolves the reference when it creates the VM"
            else:
                try:
                    if not isinstance(provider, ImagePinner):
                        entry["unresolved"] = "this cloud's provider cannot pin images"
                    else:
                        entry.update(provider.pin_image(os_name))
                except TrainvmError as exc:
                    entry["unresolved"] = f"{cloud} could not resolve it when locked: {str(exc).splitlines()[0]}"
        out[cloud] = entry
    return out


def unresolved_lines(images: dict[str, dict[str, str]]) -> list[str]:
    return [f"image on {cloud}: not pinned: {entry['unresolved']}" for cloud, entry in images.items() if entry.get("unresolved")]
