"""What the cloud commands share: the providers that have credentials, and finding a VM by name on them.
Cloud-neutral: every cloud call goes through the provider registry (``hooks.providers.get_provider``)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypedDict

from provisioner.catalog.storage import cloud_regions
from provisioner.errors import CloudError, CredentialsError, InputError, NoCloudAskedError
from provisioner.hooks.providers import get_provider, provider_clouds
from provisioner.providers.base import InstanceRecord, Provider
from provisioner.providers.capabilities import PartialLister
from provisioner.providers.registry import CLOUDS, credential_hint

NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def check_name(name: str) -> str:
    """``name`` when it can be a trainvm VM name; an input error (exit 2) before any cloud call otherwise (a
    slash, control codes, 10,000 characters... are refused here, not sent to a cloud API)."""
    if not NAME_RE.match(name):
        shown = repr(name if len(name) <= 80 else name[:80] + "...")
        raise InputError(f"{shown} is not a trainvm VM name (lowercase letters, digits and '-', at most 63, "
                         "starting with a letter)", hint="`trainvm list` shows the VMs trainvm can see")
    return name


def _skip(cloud: str, exc: CloudError) -> dict[str, str]:
    """A cloud that could not be asked: why, and how to fix it (the provider's hint, else the cloud's own)."""
    hint = f"{cloud}: {exc.hint}" if exc.hint else (CLOUDS[cloud].credential_hint if cloud in CLOUDS else "")
    return {"cloud": cloud, "reason": str(exc), **({"hint": hint} if hint else {})}


#: the variables the clouds' HTTP stacks read a CA bundle from: requests (google-auth, azure-core), OpenSSL's
#: default, botocore (docs.aws.amazon.com/cli/latest/userguide/cli-configure-envvars.html, AWS_CA_BUNDLE)
CA_BUNDLE_VARS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "AWS_CA_BUNDLE")


def check_ca_bundles() -> None:
    """A CA-bundle variable naming a file that is not there is an input error (exit 2), said before any cloud call
    (the SDKs fail on it deep inside, with an OSError that read as an internal error)."""
    for var in CA_BUNDLE_VARS:
        value = os.environ.get(var)
        if value and not os.path.isfile(value):
            raise InputError(f"{var}={value}: no such file (the cloud SDKs read their TLS CA bundle from it)",
                             hint=f"unset {var}, or point it at a PEM bundle that exists (a demo's "
                                  "`.venv/demo.env` is stale once `make demo` has stopped)")


def _providers(clouds: list[str]) -> tuple[dict[str, Provider], list[dict[str, str]]]:
    """Providers for the clouds that have credentials; the others are skipped with a reason (and a hint)."""
    check_ca_bundles()
    ready, skipped = {}, []
    for cloud in dict.fromkeys(clouds):
        if cloud not in provider_clouds():
            skipped.append({"cloud": cloud, "reason": "trainvm cannot provision on this cloud yet"})
            continue
        try:
            ready[cloud] = get_provider(cloud, candidate_regions=partial(cloud_regions, cloud))  # the catalog's
        except CloudError as exc:
            skipped.append(_skip(cloud, exc))
    return ready, skipped


def _cred_hint() -> str:
    return credential_hint()


def _credentialed() -> dict[str, Provider]:
    providers, _ = _providers(list(provider_clouds()))
    if not providers:
        raise CloudError("no cloud credentials found", hint=_cred_hint())
    return providers


class Unlisted(TypedDict):
    """A cloud (or some of its zones/regions) whose listing failed: ``status --json`` unlisted, and its hint."""

    cloud: str
    where: list[str] | None  # the zones/regions not listed; None: the whole cloud
    reason: str


@dataclass
class Listed:
    """What ``list``/``status`` found: the VMs, the clouds that answered (``asked``), the clouds not asked (no
    credentials, found when the provider is made or at its first call: ``skipped``) and what was asked but not listed
    (``unlisted``: a cloud whose listing failed for another reason, or the
    zones/regions of a cloud that did not answer) -- then the answer is partial (exit 3, docs/spec.md)."""

    found: list[tuple[InstanceRecord, Provider]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    unlisted: list[Unlisted] = field(default_factory=list)


def _all_records(cloud_filter: Callable[[str], bool] = lambda c: True) -> Listed:
    """Every trainvm VM on the clouds ``cloud_filter`` keeps (see ``Listed``). When none answered,
    ``NoCloudAskedError`` (exit 3)."""
    providers, skipped = _providers([c for c in provider_clouds() if cloud_filter(c)])
    out = Listed(skipped=skipped)
    for cloud, provider in providers.items():
        try:
            if isinstance(provider, PartialLister):
                records, missed = provider.list_partial()
            else:
                records, missed = provider.list(), []
        except CloudError as exc:
            out.skipped.append(_skip(cloud, exc))
            if not isinstance(exc, CredentialsError):  # no credentials: not asked; a listing that failed: partial
                out.unlisted.append({"cloud": cloud, "where": None, "reason": str(exc)})
            continue
        out.found.extend((r, provider) for r in records)
        out.asked.append(cloud)
        if missed:
            out.unlisted.append({"cloud": cloud, "where": missed, "reason": "did not answer"})
    if not out.asked:
        raise NoCloudAskedError(out.skipped)
    return out


def providers_for(cloud: str | None) -> dict[str, Provider]:
    """The credentialed providers, or only ``cloud``'s (``--cloud``; an error when it has no credentials)."""
    if cloud is None:
        return _credentialed()
    providers, skipped = _providers([cloud])
    if not providers:
        reason = skipped[0]["reason"] if skipped else "no credentials"
        raise CloudError(f"--cloud {cloud}: {reason}", hint=_cred_hint())
    return providers


def locate_one(name: str, providers: dict[str, Provider], verb: str) -> tuple[InstanceRecord, Provider] | None:
    """The VM called ``name`` on ``providers``; when it exists on two clouds, refuse to guess which one
    ``verb`` (down, verify...) should act on."""
    found = [(r, p) for p in providers.values() if (r := p.find(name)) is not None]
    if len(found) > 1:
        where = " and ".join(f"{r.cloud} ({r.zone or r.region})" for r, _ in found)
        choices = " or ".join(f"--cloud {r.cloud}" for r, _ in found)
        raise InputError(f"{name} exists on {where}; `{verb}` will not guess which: pass {choices}")
    return found[0] if found else None
