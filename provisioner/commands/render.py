"""``trainvm render``: the startup script, the payload that carries it, the bootstrap (user data) and the create
request for the planned offer."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner import hooks
from provisioner.catalog.models import Offer
from provisioner.container.store import LOOPBACK
from provisioner.errors import InputError, NoFeasibleOfferError
from provisioner.output import emit_json, notice, os_error_words, stderr_console
from provisioner.planner.core import plan as plan_fn
from provisioner.planner.explain import no_offer_message
from provisioner.planner.from_profile import Overrides, make_plan
from provisioner.profile import load_profile
from provisioner.providers import registry  # called through the module: tests patch registry.cluster_clouds
from provisioner.provision.launch import launch_spec
from provisioner.render.script import render_for_offer

if TYPE_CHECKING:
    from provisioner.profile import LoadedProfile
    from provisioner.providers.base import LaunchSpec


def request_body(cloud: str, spec: LaunchSpec, offer: Offer) -> dict[str, object]:
    """The create request ``up`` would send on ``cloud`` (its registered request builder, pure: no SDK)."""
    return hooks.of(cloud).request_preview(spec, offer)


def _left_out(loaded: LoadedProfile, cloud: str) -> list[str]:
    """A warning when ``--cloud`` names a cloud the profile's ``placement.clouds`` leaves out: render is for review,
    so it still renders, but the user should know that `plan` and `up` would not go there (without --cloud)."""
    clouds = list(loaded.profile.placement.clouds)
    if cloud in clouds:
        return []
    file, line = loaded.where(("placement", "clouds"))
    explicit = "clouds" in loaded.profile.placement.model_fields_set
    where = f"{file}:{line}: " if explicit and file and line else ""
    what = f"placement.clouds is [{', '.join(clouds)}]" + ("" if explicit else " (the default)")
    return [f"{where}{what}: `plan` and `up` leave {cloud} out for this profile (unless given --cloud {cloud}); "
            "this render is for review"]


def _loopback_image(loaded: LoadedProfile) -> list[str]:
    """The profile's warning that its image is on this workstation's loopback registry (validate and plan
    show it with the other profile warnings): the script render shows would pull from the VM itself."""
    return [m.render() for m in loaded.warnings if m.level == "warning" and LOOPBACK in m.message]


def run_render(path: Path, *, cloud: str, out: Path | None, regions: list[str] | None, json_out: bool) -> int:
    loaded = load_profile(path)
    warnings = _left_out(loaded, cloud) + _loopback_image(loaded)
    for w in warnings:
        notice("warning", w)
    planned = make_plan(loaded, Overrides((cloud,), tuple(regions or ()) or None, None))
    plan, catalog = planned.plan, planned.catalog
    offer: Offer | None = plan.chosen
    if offer is None:  # for review: a cloud trainvm cannot provision on yet, or that cannot read the data, still gets its script

        request = plan.request  # the request make_plan built from the record: not built a second time
        review_only = not registry.provisionable(cloud) or (request.nodes > 1 and cloud not in registry.cluster_clouds())
        relaxed = replace(request, include_unprovisionable=review_only, data_excluded_clouds={}, secret_excluded_clouds={})
        offer = plan_fn(relaxed, catalog, plan.catalog_date).chosen
        for why in (request.data_excluded_clouds.get(cloud), request.secret_excluded_clouds.get(cloud)):
            if offer is not None and why:
                notice("warning", f"{why}; `plan` and `up` rule {cloud} out for this profile (script shown for review only)")
    if offer is None:
        raise NoFeasibleOfferError(no_offer_message(plan, catalog))
    rendered = render_for_offer(loaded, offer)
    spec = launch_spec(loaded, offer, rendered=rendered)
    body = request_body(cloud, spec, offer)
    boot = rendered.preview()
    payload = rendered.payload
    # render --out: the bootstrap (user data) and the payload side by side, and the payload unpacked, so a
    # reviewer sees every file the VM runs
    files = {"user-data": boot.text.encode(), "payload.tar.gz": payload.data,
             "request.json": (json.dumps(body, indent=2) + "\n").encode()}
    files.update({f"payload/{name}": data for name, data in sorted(payload.files.items())})
    script_bytes = len(rendered.startup_sh.encode())
    written: list[str] = []  # render --out: what it wrote
    summary: dict[str, object] = {
        "profile": loaded.profile.name, "hash": loaded.hash, "cloud": cloud, "offer": offer.to_json(spec.spot),
        "sizes": {"user-data": boot.size, "user-data-gzip": boot.gzip_size, "payload.tar.gz": payload.size,
                  "startup.sh": script_bytes},
        "script_sha256": rendered.script_sha256,
        "payload": {"sha256": payload.sha256, "files": len(payload.files), "where": boot.ref.url,
                    "note": "the store's account part (PROJECT/ACCOUNT) is resolved by `up`"},
        "warnings": warnings,
    }
    if rendered.driver:
        summary["driver"] = rendered.driver
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, data in files.items():
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                (out / name).write_bytes(data)
        except OSError as exc:
            raise InputError(f"--out {out}: {os_error_words(exc, out, folder=True)}",
                             hint="--out takes a folder: it receives user-data, payload.tar.gz, payload/ and request.json") from None
        written = [str(out / n) for n in files if not n.startswith("payload/")] + [str(out / "payload") + "/"]
        summary["files"] = written
    if json_out:
        if out is None:
            summary["startup_sh"] = rendered.startup_sh
            summary["request"] = body
        emit_json(summary)
    elif out is None:
        sys.stdout.write(rendered.startup_sh)
        stderr_console().print(f"# {cloud} {offer.zone or offer.region} {offer.instance_type}: script {script_bytes:,} bytes "
                               f"in a {payload.size:,}-byte payload ({payload.sha256[:12]}); user data: a {boot.size:,}-byte bootstrap "
                               "(use --out DIR for the bootstrap, the payload and request.json)")
    else:
        stderr_console().print("wrote " + ", ".join(written))
    if rendered.driver and not json_out:
        d = rendered.driver
        stderr_console().print(f"# driver {d['version']}: the {d['set']} set, {' + '.join(d['packages'])} (exact version, held)")
    return 0
