"""``up``'s engine: walk the planned offers in failover order until one VM exists.

The offers come from the plan's failover order (same GPU model and count, priced within the plan's
failover bound); ``provision`` also refuses, without asking the cloud, any offer above ``bound``. It
returns a ``Provisioned``: the record, the offer that was created and the price that applies to it.

Capacity errors move to the next offer (next zone); a regional quota error skips the rest of that
region; a cloud-wide quota error skips the cloud, and so do ``CLOUD_CAPACITY_LIMIT`` capacity errors in a row
in one cloud (a cloud-wide stock-out must not eat the whole attempt budget before the next cloud); rate
limits and 5xx are retried inside the provider and, when still failing, count as a failed attempt; auth and
validation errors stop at once; a ``RegionUnavailableError`` (something the region itself cannot give, e.g.
its payload store) skips that region's other offers.

A create is a transaction with an owner: an attempt whose VM was deleted by someone else while it waited
(``VanishedError``, e.g. ``trainvm down`` during ``up``) stops the walk; so does an attempt that found another
``up`` owning the name (``AttemptInProgressError``: still creating it after this one's wait, or that attempt's
create failed after this one joined it), so that two ``up`` never make two VMs; so does an attempt whose cleanup could
not be verified (``left_behind``), because the next attempt would reuse the same VM name while the earlier
one may still exist. "nothing was left behind" is said only when every attempt's cleanup was checked.
Every attempt is reported through ``on_attempt`` and kept for the final error."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from provisioner.catalog.models import Offer
from provisioner.errors import (
    AttemptInProgressError,
    AuthError,
    CapacityError,
    CapacityExhaustedError,
    CloudError,
    ConflictError,
    InvalidRequestError,
    NotReadyError,
    ProviderError,
    QuotaError,
    RegionUnavailableError,
    RenderError,
    RetryExhaustedError,
    VanishedError,
)
from provisioner.planner.core import Candidate
from provisioner.providers.base import InstanceRecord, LaunchSpec, Provider
from provisioner.providers.registry import credential_hint
from provisioner.providers.store import users as payload_users

#: what ``provision`` walks: the plan's candidates (``Plan.candidates``: each offer with the price that applies, what
#: ``up`` passes) or bare offers (priced by ``price_of``); the callbacks get the items as they were given
Item = TypeVar("Item", Offer, Candidate)

CLOUD_CAPACITY_LIMIT = 6  # capacity errors in a row in one cloud before its remaining offers are skipped


@dataclass(frozen=True)
class Attempt:
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    outcome: str
    error_code: str | None
    message: str
    price_hourly: float | None = None  # the price that applies to the offer tried

    def to_json(self) -> dict[str, object]:
        return {
            "cloud": self.cloud, "region": self.region, "zone": self.zone, "instance_type": self.instance_type,
            "price_hourly": self.price_hourly, "outcome": self.outcome, "error_code": self.error_code,
            "message": self.message,
        }

    def render(self) -> str:
        where = self.zone or self.region
        code = f" [{self.error_code}]" if self.error_code else ""
        price = f" (${self.price_hourly:.3f}/h)" if self.price_hourly is not None else ""
        return f"{self.cloud} {where} {self.instance_type}: {self.outcome}{code} {self.message}".rstrip() + price


@dataclass(frozen=True)
class Provisioned:
    """What ``provision`` created: the VM, the offer it was created from, the hourly price that applies
    (the spot price for spot VMs; the record carries the same price) and every attempt, in order."""

    record: InstanceRecord
    offer: Offer
    price_hourly: float
    attempts: tuple[Attempt, ...]


class AttemptsMixin:
    """An error that carries every attempt of a ``provision`` walk and lists them under its message."""

    attempts: tuple[Attempt, ...]

    def __init__(self, message: str, attempts: Sequence[Attempt], *, hint: str | None = None) -> None:
        self.attempts = tuple(attempts)
        lines = "\n".join(f"  {i}. {a.render()}" for i, a in enumerate(self.attempts, 1))
        super().__init__(f"{message}\n{lines}" if lines else message, hint=hint)  # type: ignore[call-arg]


class ProvisionError(AttemptsMixin, CapacityExhaustedError):
    """Every offer was tried (or the walk had to stop after a cleanup it could not check): exit 1."""


class ProvisionInProgressError(AttemptsMixin, NotReadyError):
    """Another attempt owns the VM name (still creating it, or it joined that attempt and saw it fail): exit 5."""


class ProvisionCloudError(AttemptsMixin, CloudError):
    """The cloud refused the request (auth, invalid, a VM deleted meanwhile): exit 3."""


def _attempt(offer: Offer, outcome: str, code: str | None, message: str, price: float | None = None) -> Attempt:
    return Attempt(offer.cloud, offer.region, offer.zone, offer.instance_type, outcome, code, message, price)


def _on_demand(offer: Offer) -> float:
    return offer.price_hourly


def _left_summary(unchecked: list[Attempt]) -> str:
    if not unchecked:
        return "nothing was left behind (checked after every attempt)"
    where = ", ".join(a.zone or a.region for a in unchecked)
    return f"the cleanup of {len(unchecked)} attempt(s) ({where}) could not be checked"


def find_existing(name: str, clouds: Sequence[str], providers: Callable[[str], Provider], profile_hash: str) -> InstanceRecord | None:
    """The VM already called ``name`` on any of ``clouds``; a different profile hash is a clear error, and so is
    a lookup that could not answer (throttled, timed out, a region or zone unreachable): ``up`` never creates a VM
    while one of that name may exist where it could not look."""
    for cloud in dict.fromkeys(clouds):
        try:
            record = providers(cloud).find(name)
        except ProviderError as exc:
            if isinstance(exc, AuthError):
                raise
            raise ProviderError(
                f"could not tell whether {name} already exists on {cloud} ({exc}); not creating it: a second, billed VM "
                "of that name could be made", code=exc.code or "LOOKUP_FAILED",
                hint=f"run `trainvm up` again later; `trainvm status {name}` shows whether it exists") from exc
        if record is None:
            continue
        if record.hash and record.hash != profile_hash[: len(record.hash)]:
            raise ConflictError(
                f"a VM named {name} already exists on {cloud} ({record.zone or record.region}) for another version of the "
                f"profile (hash {record.hash}, this one is {profile_hash[:16]}); run `trainvm down {name}` or pass --name"
            )
        return record
    return None


IN_PROGRESS = ("PROVISIONING", "STAGING", "CREATING", "UPDATING")  # InstanceRecord.state of a VM still being created


def finish_existing(existing: InstanceRecord, offers: Sequence[Item], spec_for: Callable[[Item], LaunchSpec],
                    providers: Callable[[str], Provider]) -> InstanceRecord:
    """A re-run of ``up`` that finds its VM still being created waits for that create to finish (the provider's
    ``create`` adopts a VM of the same name and hash, and waits, bounded, for it), instead of returning at once."""
    if existing.state not in IN_PROGRESS:
        return existing
    where = existing.zone or existing.region
    item = next((i for i in offers if (o := _offer(i)).cloud == existing.cloud and (o.zone or o.region) == where
                 and o.instance_type == existing.instance_type), None)
    if item is None:  # not an offer of this plan any more: report it as it is
        return existing
    return providers(existing.cloud).create(spec_for(item), _offer(item))


def _offer(item: Offer | Candidate) -> Offer:
    return item.offer if isinstance(item, Candidate) else item


def provision(
    offers: Sequence[Item],
    spec_for: Callable[[Item], LaunchSpec],
    providers: Callable[[str], Provider],
    on_attempt: Callable[[Attempt], None] = lambda a: None,
    max_attempts: int | None = None,
    *,
    price_of: Callable[[Offer], float] = _on_demand,
    bound: float | None = None,
    name: str = "the VM",
    preflight: Callable[[Item], str | None] | None = None,
) -> Provisioned:
    """Try ``offers`` in order (the plan's candidates, or bare offers); the price that applies is a candidate's
    (the plan's, computed once), a bare offer's ``price_of``; ``bound`` is the most
    any attempt may cost per hour (offers above it are never tried). ``spec_for`` renders and stages the offer's
    payload: a RenderError there skips that cloud (its script cannot be made for it), a ProviderError (the
    payload store refused) counts as that attempt's failure and skips the cloud's other offers (an auth error stops
    the walk, as any; a RegionUnavailableError skips only that region's). A failed attempt whose ``create`` left nothing also
    releases the payload object this attempt uploaded as a new object (``PayloadRef.uploaded``, not ``refreshed``)
    when no VM carries its label. ``preflight`` (provision/quota.py)
    names why an offer's region lacks the quota headroom: that region is skipped with no create call (one
    ``no-quota`` attempt, not counted by ``max_attempts``)."""
    attempts: list[Attempt] = []
    unchecked: list[Attempt] = []  # failed attempts whose cleanup the provider did not verify
    skip_regions: set[tuple[str, str]] = set()
    skip_clouds: set[str] = set()
    stocked_out: set[tuple[str, str, str]] = set()  # (cloud, zone or region, gpu): no need to ask again
    capacity_run: dict[str, int] = {}  # cloud -> capacity errors in a row
    for item in offers:
        offer = item.offer if isinstance(item, Candidate) else item
        if max_attempts is not None and sum(a.outcome != "no-quota" for a in attempts) >= max_attempts:
            raise ProvisionError(
                f"gave up after {len(attempts)} attempt(s) (--max-attempts); {_left_summary(unchecked)}", attempts,
                hint="raise --max-attempts, or relax the profile; `trainvm plan` lists the remaining offers",
            )
        if offer.cloud in skip_clouds or (offer.cloud, offer.region) in skip_regions:
            continue
        if (offer.cloud, offer.zone or offer.region, offer.gpu_name) in stocked_out:
            continue
        price = item.price if isinstance(item, Candidate) else price_of(offer)
        if bound is not None and price > bound:
            continue
        short = preflight(item) if preflight is not None else None
        if short is not None:  # no headroom there: no create call
            attempts.append(_attempt(offer, "no-quota", "QUOTA_PREFLIGHT", short, price))
            on_attempt(attempts[-1])
            skip_regions.add((offer.cloud, offer.region))
            continue
        spec: LaunchSpec | None = None
        try:
            spec = spec_for(item)
            record = providers(offer.cloud).create(spec, offer)
        except RenderError as exc:
            attempt = _attempt(offer, "skipped", "RenderError", f"the startup script cannot be rendered for {offer.cloud}: {exc}", price)
            attempts.append(attempt)
            on_attempt(attempt)
            skip_clouds.add(offer.cloud)
            continue
        except ConflictError:
            raise  # a VM of that name belongs to something else: never fail over into a duplicate
        except ProviderError as exc:
            attempt = _attempt(offer, exc.outcome, exc.code, str(exc), price)
            attempts.append(attempt)
            on_attempt(attempt)
            if spec is not None and spec.payload is not None and spec.payload.uploaded and not spec.payload.refreshed \
                    and exc.cleanup == "verified":
                _release(providers(offer.cloud), spec)
            if spec is None and exc.cleanup == "left":  # a payload upload whose outcome the store could not check:
                unchecked.append(attempt)  # no VM was asked for, so the next offer is safe; the summary says so
            else:
                _stop_if_unsafe(exc, spec.name if spec is not None else name, offer, attempts)
            if isinstance(exc, RegionUnavailableError):  # e.g. the region's payload store cannot exist: other regions can
                skip_regions.add((offer.cloud, offer.region))
                if exc.cleanup != "verified" and attempt not in unchecked:
                    unchecked.append(attempt)
                continue
            if spec is None:  # the payload store failed (unreachable, throttled to the end): the cloud's other offers
                skip_clouds.add(offer.cloud)  # would meet it again, each after its own retries
                continue
            if exc.cleanup != "verified":
                unchecked.append(attempt)
            capacity_run[offer.cloud] = capacity_run.get(offer.cloud, 0) + 1 if isinstance(exc, CapacityError) else 0
            if isinstance(exc, QuotaError):
                if exc.scope == "cloud":
                    skip_clouds.add(offer.cloud)
                else:
                    skip_regions.add((offer.cloud, offer.region))
            elif isinstance(exc, CapacityError):
                stocked_out.add((offer.cloud, offer.zone or offer.region, offer.gpu_name))
                if capacity_run[offer.cloud] >= CLOUD_CAPACITY_LIMIT and any(_offer(o).cloud != offer.cloud for o in offers):
                    skip_clouds.add(offer.cloud)  # a cloud-wide stock-out: let the other clouds have a turn
        else:
            attempt = _attempt(offer, "created", None, record.name, price)
            attempts.append(attempt)
            on_attempt(attempt)
            return Provisioned(replace(record, price_hourly=price), offer, price, tuple(attempts))
    if attempts and all(a.outcome == RetryExhaustedError.outcome for a in attempts):
        # no cloud said "no room": each attempt ended in a connection, throttling or 5xx failure (an endpoint or a
        # payload store that does not answer). That is a cloud or network error (exit 3), not capacity exhausted
        raise ProvisionCloudError(
            f"no VM could be created: none of the {len(attempts)} attempt(s) got an answer from the cloud (connection, "
            f"throttling or service errors, retries spent); {_left_summary(unchecked)}", attempts,
            hint="a connection or service problem, not a lack of capacity: check the network and the cloud's "
                 "endpoints (the attempts say which), then run `trainvm up` again")
    within = f" within the failover bound of ${bound:.3f}/h" if bound is not None else ""
    raise ProvisionError(
        f"no VM could be created{within} after {len(attempts)} attempt(s); {_left_summary(unchecked)}",
        attempts,
        hint="try again later, or relax the profile (more regions, placement.max_failover_premium or max_price_per_hour, spot); "
             "`trainvm plan` shows the bound and the failover order",
    )


def _release(provider: Provider, spec: LaunchSpec) -> None:
    """Delete the payload object a failed attempt uploaded as a new object, unless a VM carries its label (it was
    uploaded again after the lifecycle rule removed it, or by another `up` meanwhile). Best effort: the store's
    lifecycle rule removes it after providers/store.EXPIRE_DAYS otherwise."""
    ref = spec.payload
    if ref is None:
        return
    try:
        if payload_users(provider, ref.region, ref.sha256, {spec.name}):
            return
        provider.payload_store().release(ref.region, ref.sha256)
    except CloudError:  # a listing or store error: kept (never deleted without knowing who uses it)
        pass


def _stop_if_unsafe(exc: ProviderError, name: str, offer: Offer, attempts: list[Attempt]) -> None:
    """Failures after which no further attempt may start: refused credentials/requests, a VM deleted by
    someone else while we waited, another attempt that owns the name (another `up` still creating it: any other
    offer would make a second, billed VM of the same name), and an attempt that may have left its VM (the next
    would reuse the name)."""
    if isinstance(exc, AttemptInProgressError):
        why = getattr(exc, "stop_reason", None) or f"a second VM named {name} would be created and billed as well"
        raise ProvisionInProgressError(f"{exc}; not trying other offers: {why}", attempts,
            hint=exc.hint) from exc
    if isinstance(exc, (AuthError, InvalidRequestError)):
        hint = f"check your credentials ({credential_hint((offer.cloud,))})" if isinstance(exc, AuthError) else None
        raise ProvisionCloudError(f"{offer.cloud} refused the request; not trying other offers", attempts,
                                  hint=exc.hint or hint) from exc
    if isinstance(exc, VanishedError):
        raise ProvisionCloudError(
            f"{name} was deleted while `up` waited for it (a `trainvm down`, or someone else); not creating it again",
            attempts, hint=f"run `trainvm up` again if you do want {name}") from exc
    if exc.cleanup == "left":
        left = ", ".join(exc.left_behind) or name
        raise ProvisionCloudError(
            f"the attempt in {offer.location} may have left {left} behind (its cleanup could not be verified); "
            "not trying other offers while it may still exist under the same name", attempts,
            hint=f"run `trainvm down {name}` (repeat until it says gone), then `trainvm up` again") from exc
