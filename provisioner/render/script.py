"""``render_script``: the startup script for one profile on one machine, and the payload that carries it.

The script (templates/startup.sh.j2) is what runs on the VM; it travels inside the payload
(render/payload.py) with the agent, never in user data. User data is the bootstrap (render/bootstrap.py),
rendered once the payload is staged (``RenderedScript.user_data(ref)``), or for review against the store
``up`` would use (``preview``). Nothing here depends on a cloud limit: the payload has none.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from provisioner.errors import RenderError
from provisioner.providers.registry import rehearsal_clouds
from provisioner.providers.store import PayloadRef
from provisioner.render.bootstrap import UserData, preview_ref, render_bootstrap
from provisioner.render.context import build_context
from provisioner.render.payload import Payload, build_payload
from provisioner.render.script_context import RenderTarget, ScriptContext, target_from_offer

if TYPE_CHECKING:
    from provisioner.compat.facts import Facts
    from provisioner.profile import LoadedProfile
    from provisioner.profile.model import Lifecycle
    from provisioner.providers.offer import Offer, Shape
from provisioner.render.shell import template_env

SCRIPT_PATH = "/usr/local/sbin/trainvm-provision"


class DriverSet(TypedDict):
    version: str
    set: str  # "compute-only (headless)" | "desktop and compute"
    packages: list[str]


@dataclass(frozen=True)
class RenderedScript:
    """One render: the script, the payload holding it, and how to make the bootstrap that fetches it."""

    cloud: str
    region: str
    profile_hash: str
    os_name: str
    startup_sh: str  # the script as it runs on the VM (render --out: payload/startup.sh)
    payload: Payload
    #: what the driver phase installs: {"driver", "set" ("compute-only (headless)" | "desktop and compute"), "packages"}
    driver: DriverSet | None = None

    @property
    def script_sha256(self) -> str:
        return hashlib.sha256(self.startup_sh.encode("utf-8")).hexdigest()

    def user_data(self, ref: PayloadRef) -> UserData:
        """The bootstrap for this payload staged at ``ref`` (its sha256 must be this payload's)."""
        if ref.sha256 != self.payload.sha256:
            raise RenderError(f"the staged payload {ref.sha256[:12]} is not the rendered one {self.payload.sha256[:12]}")
        return render_bootstrap(ref, self.profile_hash, self.os_name)

    def preview(self) -> UserData:
        """The bootstrap as far as it is known offline (the store's account part is a placeholder)."""
        return render_bootstrap(preview_ref(self.cloud, self.region, self.payload.sha256, self.payload.size),
                                self.profile_hash, self.os_name)


def _render(ctx: ScriptContext) -> str:
    script = template_env().get_template("startup.sh.j2").render(ctx=ctx)
    try:
        script.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RenderError(f"the script would contain a character that is not valid UTF-8 text ({exc.reason})") from None
    return script


def render_script(loaded: LoadedProfile, target: RenderTarget, *, facts: Facts | None = None, image_mode: str = "",
                  lifecycle: Lifecycle | None = None) -> RenderedScript:
    """Render the startup script of ``loaded`` (a LoadedProfile) for ``target`` and pack it into its payload
    (``image_mode``: "" installs; "bake"/"baked": docs/bake.md; ``lifecycle``: see build_context)."""
    ctx = build_context(loaded, target, facts, image_mode, lifecycle=lifecycle)
    script = _render(ctx)
    meta = {"profile": ctx.profile_name, "profile_hash": ctx.profile_hash, "cloud": target.cloud,
            "region": target.region, "instance_type": target.instance_type, "os": ctx.os_name}
    return RenderedScript(cloud=target.cloud, region=target.region, profile_hash=ctx.profile_hash, os_name=ctx.os_name,
                          startup_sh=script, payload=build_payload(script, meta),
                          driver={"version": ctx.driver, "set": ctx.driver_set, "packages": list(ctx.driver_pkgs)})


def render_for_offer(loaded: LoadedProfile, offer: Offer | Shape, image_mode: str = "") -> RenderedScript:
    """The render for one of the plan's offers (its cloud, region and shape): what ``up`` does once per offer it
    tries, before the provision stage stages the payload (provision/launch.py ``stage``) and builds the request."""
    return render_script(loaded, target_from_offer(offer, rehearsal_for(loaded, offer.cloud)), image_mode=image_mode)


def rehearsal_for(loaded: LoadedProfile, cloud: str) -> tuple[str, int] | None:
    """(GPU, count) the profile is rehearsed with on ``cloud`` (``rehearsed_gpu``), None on a cloud with GPUs: what
    ``render_for_offer``, ``bake`` and bake/use.py's ``offer_stack`` render for, so the three agree."""
    return rehearsed_gpu(loaded) if cloud in rehearsal_clouds() else None


def rehearsed_gpu(loaded: LoadedProfile) -> tuple[str, int]:
    """(GPU, count) a rehearsal renders for (a cloud without a GPU, planner/rehearsal.py): the accepted GPU with the
    least memory that the stack runs on (``hardware.gpu``'s names, else every cloud GPU of at least
    ``min_gpu_memory_gib``), as the planner's host defaults take it; its driver is what the rehearsal installs."""
    from provisioner.compat.facts import load_facts  # lazy: startup

    hw, facts = loaded.profile.hardware, load_facts()
    names = [n for n in (hw.gpu_names() or facts.cloud_gpu_names()) if n not in loaded.resolved.gpu_exclusions
             and n in facts.gpus and facts.gpus[n].memory_gib >= (hw.min_gpu_memory_gib or 0)]
    if not names:
        raise RenderError("no GPU the profile accepts runs its stack: nothing to rehearse")
    return min(names, key=lambda n: (facts.gpus[n].memory_gib, n)), hw.gpu_count
