"""``trainvm bake``: a private image of the profile's locked stack (docs/bake.md).

plan (the offer whose GPU the script is rendered for) -> render the startup script in ``bake`` mode -> stage its
payload -> create the builder (the cloud's Baker: a small CPU shape, same OS image) through the cloud's Provider
-> follow its console until ``TRAINVM_STATUS=baked`` (or ``failed:PHASE:LINE``) -> stop it -> capture its boot
disk, labelled with the image identity -> delete the builder. The builder is deleted in every case (failure,
Ctrl-C, SIGTERM). A ``trainvm`` killed outright (SIGKILL, a sleeping or offline workstation) cannot delete it, so the
builder also bounds itself: its create request and its script carry the lifecycle ``max_run_hours`` =
``builder_limit_hours`` (TRAINVM_BAKE_TIMEOUT + BUILDER_LIMIT_MARGIN_S) with ``on_max_run: delete``, the machinery of
``up`` (GCE ``maxRunDuration``; AWS ``InstanceInitiatedShutdownBehavior=terminate`` and the max-run timer armed by the
bake-mode script before its first install phase; Azure the max-run timer deleting the builder's resource group with
the VM's identity and its Contributor role on that group). ``bake-clean`` disarms the timer, so the captured disk
never carries it (docs/bake.md "Money and disks").
"""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from provisioner import hooks, settings
from provisioner.bake import records
from provisioner.bake.exact import require_exact
from provisioner.catalog.storage import cloud_regions
from provisioner.errors import CloudError, InputError, NoFeasibleOfferError, NotReadyError, TrainvmError
from provisioner.hooks.providers import get_provider
from provisioner.output import emit_json, notice, stderr_console
from provisioner.planner.explain import no_offer_message
from provisioner.planner.from_profile import Overrides, make_plan
from provisioner.profile import load_profile
from provisioner.providers.base import labels_for, vm_name
from provisioner.providers.image_identity import identity_of
from provisioner.providers.lifecycle import describe as lifecycle_describe
from provisioner.providers.store import release
from provisioner.provision.launch import launch_spec, locked_images
from provisioner.wording import duration

if TYPE_CHECKING:
    from types import FrameType

    from provisioner.catalog.models import Offer
    from provisioner.profile import LoadedProfile
    from provisioner.profile.model import Lifecycle
    from provisioner.providers.bake_base import BakedImage, Baker
    from provisioner.providers.base import Provider
    from provisioner.providers.image_identity import ImageIdentity
    from provisioner.providers.store import PayloadRef
    from provisioner.render.script import RenderedScript

#: what the builder's own limit adds to TRAINVM_BAKE_TIMEOUT (trainvm's wait for ``baked``, counted from the create;
#: the guest's timer counts from its boot, later): room for the stop that follows a bake that ends at the timeout
BUILDER_LIMIT_MARGIN_S = 1800.0
BUILDER_ROLE_LABEL = "trainvm-role"


class BakeFailedError(TrainvmError):
    """The builder's startup script failed: the phase and line, as ``up --wait-ready`` reports them."""

    exit_code = 1


def builder_name(vm: str) -> str:
    """``<vm name>-bake``, cut to 63 characters (the shortest VM name limit of the clouds, GCE's)."""
    return f"{vm[:58].rstrip('-')}-bake"


def baker_for(cloud: str, provider: Provider | None = None) -> Baker:
    """The Baker of ``cloud`` built on its provider (``provider``, else the cloud's); InputError for a cloud that
    cannot bake yet."""

    make = hooks.of(cloud).baker if cloud in hooks.HOOKS else None
    if make is None:
        can = ", ".join(sorted(hooks.bakers())) or "none"
        raise InputError(f"--cloud {cloud}: trainvm cannot bake images on {cloud} yet (clouds that can: {can}); see docs/bake.md")
    return make(provider if provider is not None else get_provider(cloud, candidate_regions=partial(cloud_regions, cloud)))


def builder_limit_hours(timeout_s: float) -> float:
    """The builder's own run limit, in hours: the bake's wait (TRAINVM_BAKE_TIMEOUT) plus BUILDER_LIMIT_MARGIN_S."""
    return (timeout_s + BUILDER_LIMIT_MARGIN_S) / 3600


def builder_lifecycle(lifecycle: Lifecycle, hours: float) -> Lifecycle:
    """The builder's lifecycle: no idle shutdown (it is busy, then stopped by trainvm), deleted after ``hours``. One
    value for both its create request and its script, so that they agree (AWS: the shutdown behaviour terminate is
    what the script's max-run timer relies on)."""
    return lifecycle.model_copy(update={"idle_shutdown_minutes": None, "idle_gpu_minutes": None, "on_idle": "delete",
                                        "max_run_hours": hours, "on_max_run": "delete"})


@dataclasses.dataclass(frozen=True)
class BakePlan:
    """Everything a bake needs, computed offline but for the base image (the cloud's current image of the OS)."""

    loaded: LoadedProfile
    offer: Offer  # the GPU offer the script is rendered for
    builder_offer: Offer
    rendered: RenderedScript
    identity: ImageIdentity
    #: the cloud's regions of the failover order (the builder's first): where the image is copied/replicated
    regions: tuple[str, ...] = ()
    #: the builder's own run limit (builder_limit_hours), in its create request and its script
    limit_hours: float = 0.0


def plan_bake(loaded: LoadedProfile, baker: Baker, cloud: str, region: str | None) -> BakePlan:
    from provisioner.render import (  # lazy: startup (plan loads bake.run; render pulls in jinja2)
        RenderTarget,
        build_context,
        is_nvswitch_shape,
        render_script,
    )
    from provisioner.render.script import rehearsal_for  # lazy: startup (plan loads bake.run; render pulls in jinja2)

    planned = make_plan(loaded, Overrides((cloud,), (region,) if region else None, None))
    offer = planned.plan.chosen
    if offer is None:
        raise NoFeasibleOfferError(no_offer_message(planned.plan, planned.catalog))
    # a cloud without a GPU (a rehearsal, planner/rehearsal.py) bakes the stack `up` renders there: the profile's GPU's
    rehearse = rehearsal_for(loaded, cloud)
    gpu, count = rehearse or (offer.gpu_name, offer.gpu_count)
    target = RenderTarget(cloud, baker.builder_shape, gpu, count, offer.region, offer.zone,
                          nvswitch=is_nvswitch_shape(cloud, offer.instance_type, gpu, count),
                          local_nvme_gib=int(getattr(offer, "local_nvme_max_gib", 0) or 0),  # the GPU VM's: mdadm
                          rehearsal=rehearse is not None)
    limit = builder_limit_hours(settings.seconds("TRAINVM_BAKE_TIMEOUT", 5400.0))
    # the builder's watchdog and max-run timer follow the builder's lifecycle (its own limit), not the profile's;
    # everything else (the data tools a baked VM's own lifecycle calls need, hence the stack identity) the profile's
    lifecycle = builder_lifecycle(loaded.profile.lifecycle, limit)
    rendered = render_script(loaded, target, image_mode="bake", lifecycle=lifecycle)
    ctx = build_context(loaded, target, None, "bake", lifecycle=lifecycle)
    base = baker.base_image(loaded.profile.stack.os, locked_images(loaded).get(cloud), region=offer.region)
    regions = tuple(dict.fromkeys(o.region for o in (offer, *planned.plan.failover) if o.cloud == cloud))
    return BakePlan(loaded, offer, baker.builder_offer(offer), rendered, identity_of(ctx, base), regions, limit)


#: set by SIGTERM during a bake: Python drops an exception raised while a finalizer or weakref callback runs
#: ("Exception ignored in ..."), so the KeyboardInterrupt the handler raises can be lost; wait_baked checks this too
_TERMINATED = threading.Event()


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM ends the bake like Ctrl-C (KeyboardInterrupt), so that the builder is deleted either way."""
    def handler(signum: int, frame: FrameType | None) -> None:
        _TERMINATED.set()
        raise KeyboardInterrupt

    _TERMINATED.clear()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def wait_baked(provider: Provider, name: str, *, timeout: float, interval: float,
               say: Callable[[str], object] | None = None) -> str:
    """Follow the builder's console until its script reports ``baked`` or ``failed:PHASE:LINE``; that status.
    BakeFailedError names the phase, the line and the script's last ERROR message; NotReadyError on timeout."""
    from provisioner.providers.poll import poll  # lazy: startup
    from provisioner.verify.console import ConsoleFollower  # lazy: startup

    follower = ConsoleFollower()
    errors: list[str] = []

    def step() -> str | None:
        if _TERMINATED.is_set():  # a SIGTERM whose KeyboardInterrupt Python dropped (see _TERMINATED)
            raise KeyboardInterrupt
        chunk = provider.console(name, follower.offset)
        if chunk is None:
            raise CloudError(f"the builder {name} is gone before its bake finished")
        for line in chunk[0].splitlines():
            if " ERROR: " in line:
                errors.append(line.split(" ERROR: ", 1)[1].strip())
        for ev in follower.feed(*chunk):
            if say is not None and ev.kind == "start":
                say(f"phase {ev.phase}")
        return follower.status

    def done(status: str | None) -> bool:
        return status is not None and (status == "baked" or status.startswith("failed:"))

    def timed_out(last: object) -> BaseException:
        if isinstance(last, BaseException):
            return last
        where = f"in phase {follower.phase}" if follower.phase else "before the script reported anything"
        return NotReadyError(f"{name}: the bake did not finish within {timeout:g} s (TRAINVM_BAKE_TIMEOUT), {where}")

    status = poll(step, ready=done, deadline=time.monotonic() + timeout, interval=interval, timed_out=timed_out)
    assert status is not None
    if status.startswith("failed:"):
        _, phase, line = status.split(":", 2)
        why = errors[-1] if errors else "see `trainvm logs` output above"
        raise BakeFailedError(f"the bake failed in phase {phase} at line {line or '?'} of the startup script: {why}",
                              hint="fix the cause and run `trainvm bake` again; the builder was deleted")
    return status


def run_bake(path: Path, *, cloud: str, region: str | None, json_out: bool) -> int:
    loaded = load_profile(path)
    require_exact(loaded)
    baker = baker_for(cloud)
    provider = baker.provider
    bp = plan_bake(loaded, baker, cloud, region)
    err = stderr_console()

    def say(text: str) -> None:
        if not json_out:
            err.print(text)

    existing = baker.find(bp.identity)
    if existing is not None:
        _record(existing)
        say(f"{existing.name} already holds this exact stack (stack {bp.identity.stack}); nothing to bake")
        if json_out:
            emit_json({"image": _image_doc(existing), "baked": False, "reused": True})
        else:
            print(existing.name)
        return 0
    p = loaded.profile
    name = builder_name(vm_name(p.name, loaded.hash))
    ref = provider.payload_store().stage(bp.builder_offer.region, bp.rendered.payload.data, bp.rendered.payload.sha256)
    spec = launch_spec(loaded, bp.builder_offer, name=name, spot=False, rendered=bp.rendered, ref=ref)
    spec = dataclasses.replace(
        spec, labels={**labels_for(p.name, loaded.hash, None, ref.sha256), BUILDER_ROLE_LABEL: "builder"},
        local_nvme_gib=0, ssh_from=None, idle_shutdown_minutes=None, max_run_hours=bp.limit_hours, on_max_run="delete",
        price_hourly=None)
    timeout = settings.seconds("TRAINVM_BAKE_TIMEOUT", 5400.0)
    interval = settings.seconds("TRAINVM_READY_POLL_SECONDS", 15.0)
    t0 = time.monotonic()
    image = None
    try:
        with _sigterm_interrupts():
            say(f"builder {name}: {bp.builder_offer.instance_type} in {bp.builder_offer.zone or bp.builder_offer.region}, "
                f"{p.stack.os} ({bp.identity.base_image}); rendered for {bp.offer.gpu_count} x {bp.offer.gpu_name}")
            say(f"should trainvm be killed, the builder deletes itself after {duration(bp.limit_hours * 3600)} "
                f"(TRAINVM_BAKE_TIMEOUT + {duration(BUILDER_LIMIT_MARGIN_S)}): {lifecycle_describe(cloud, 'delete')}")
            record = provider.create(spec, bp.builder_offer)
            wait_baked(provider, record.name, timeout=timeout, interval=interval, say=say)
            say(f"stopping {name} to capture its disk")
            provider.stop(record.name, wait=True)
            image = baker.capture(record, bp.identity, p.name, regions=bp.regions)
    finally:
        payload = _release_payload(provider, cloud, ref, name, deleted=_delete_builder(provider, name, say))
        if payload["state"] != "none":
            say(f"payload {payload['sha256'] or ''}: {payload['message']}")
    seconds = round(time.monotonic() - t0, 1)
    _record(image)
    if json_out:
        emit_json({"image": _image_doc(image), "baked": True, "reused": False, "seconds": seconds, "builder": name,
                   "payload": payload})
    else:
        say(f"baked {image.name} (family {image.family}) in {seconds:g} s; the builder {name} was deleted")
        print(image.name)
    return 0


def _record(image: BakedImage) -> None:
    """The local record of bakes (provisioner/bake/records.py) that ``plan`` reads offline; best effort."""
    if not records.add(image):
        notice("note", f"could not write the local record of bakes ({records.path()}); `plan` will not know of {image.name}")


def _delete_builder(provider: Provider, name: str, say: Callable[[str], object]) -> bool:
    """Delete the builder and its disks, whatever happened; say so, or say what is left and how to delete it. False
    when it could not be deleted."""
    try:
        gone = provider.delete(name, wait=True)
    except BaseException as exc:  # noqa: BLE001 - reported, then the original outcome propagates

        stderr_console().print(f"the builder {name} could not be deleted ({exc}); delete it: trainvm down {name} --yes")
        return False
    if gone:
        say(f"deleted the builder {name} and its disk")
    return True


def _release_payload(provider: Provider, cloud: str, ref: PayloadRef, name: str, *, deleted: bool) -> dict[str, object]:
    """The builder's payload, released as ``down`` releases a VM's (providers/store.py ``release``: only when no
    other VM names it; a store error is reported, never raised). A builder that could not be deleted keeps it:
    its ``trainvm down`` releases it."""
    if not deleted:
        return {"state": "kept", "sha256": ref.sha256[:16], "users": [name],
                "message": f"kept: the builder {name} still names it (`trainvm down {name} --yes` removes both)"}
    return release(provider, cloud, ref.region, ref.sha256, {name})


def _image_doc(image: BakedImage) -> dict[str, object]:
    return {"name": image.name, "cloud": image.cloud, "ref": image.ref, "family": image.family, "status": image.status,
            "created": image.created, "size_gib": image.size_gib, "regions": list(image.regions), "labels": image.labels}
