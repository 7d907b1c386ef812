"""Quota preflight, cloud-neutral: does a region have the quota headroom an offer needs, before any create call?

Each cloud's reader (its ``quota_reader`` hook, provisioner/hooks/: the cloud's module is imported only when
quotas are read) returns a ``QuotaSource`` for a provider: the account it reads, how to ask for an increase, how
to read one scope's quotas (a region, or ``GLOBAL`` for account-wide metrics) as ``{metric: (limit, usage)}``,
and which metrics an offer needs (``QuotaNeed``). Here the needs meet the readings (``QuotaReading``):

- ``short``: some metric's headroom (limit - usage) is below what is asked (vCPUs and GPUs x nodes). ``up``
  skips that region with no create call and names the numbers; ``plan --quota`` shows the same line.
- ``unknown``: the read failed (a permission, a timeout), a needed quota has no metric the cloud lists that trainvm
  can name (``QuotaNeed.unread``), or the cloud has no reader: a warning, and ``up``
  proceeds as it would without the check (never a wrong "no quota"). A metric the cloud did not report is not
  checked (absent is not zero).
- ``ok``: every needed metric has the headroom.

Readings are cached for ``CACHE_SECONDS`` (quotas change when someone else creates a VM) in
``~/.cache/trainvm/quota`` with the time they were read; their age is shown. ``TRAINVM_NO_CACHE`` skips the
cache. Nothing here imports a cloud SDK. The records a reader fills (``QuotaNeed``, ``QuotaReading``, ``QuotaSource``,
``Usage``, ``GLOBAL``) live in providers/quota_records.py, beside the provider contract, so that a cloud's reader
imports nothing from provision/ (issue 37); they are re-exported here.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from provisioner import hooks, settings
from provisioner.cache import cache_dir
from provisioner.providers.quota_records import GLOBAL, QuotaNeed, QuotaReading, QuotaShape, QuotaSource, Usage
from provisioner.wording import failure_words

if TYPE_CHECKING:
    from provisioner.providers.base import Provider

CACHE_SECONDS = 300.0
__all__ = ["GLOBAL", "QuotaCheck", "QuotaNeed", "QuotaReading", "QuotaSource", "Usage", "Preflight", "quota_source"]


@dataclass(frozen=True)
class QuotaCheck:
    """The quota verdict of one offer (its cloud, region, shape, spot or not, nodes)."""

    cloud: str
    region: str
    instance_type: str
    status: Literal["ok", "short", "unknown"]
    readings: tuple[QuotaReading, ...] = ()
    note: str | None = None  # why it is unknown
    increase_hint: str | None = None
    age_s: float = 0.0  # age of the oldest reading used

    def message(self) -> str:
        if self.status == "unknown":
            read = "; ".join(r.text(self.region) for r in self.readings if r.headroom is not None)
            return f"quota: not checked in {self.cloud} {self.region} ({self.note})" + (f"; read: {read}" if read else "")
        if self.status == "ok":
            return f"quota: ok in {self.cloud} {self.region}: " + "; ".join(r.text(self.region) for r in self.readings if r.headroom is not None)
        short = "; ".join(r.text(self.region) for r in self.readings if r.short)
        return f"quota: {short}" + (f"; {self.increase_hint}" if self.increase_hint else "")

    def to_json(self) -> dict[str, object]:
        return {"cloud": self.cloud, "region": self.region, "instance_type": self.instance_type, "status": self.status,
                "message": self.message(), "age_seconds": round(self.age_s, 1), "note": self.note,
                "increase_hint": self.increase_hint if self.status == "short" else None,
                "readings": [r.to_json() for r in self.readings]}


def quota_source(cloud: str, provider: Provider) -> QuotaSource | None:
    """The cloud's quota reader for ``provider`` (None: the registry names none)."""
    reader = hooks.of(cloud).quota_reader
    return None if reader is None else reader(provider)


@dataclass
class Preflight:
    """Quota checks for one ``up`` / ``plan --quota``: per offer, memoised per (cloud, region, shape)."""

    providers: Mapping[str, Provider]
    spot: bool
    nodes: int
    warn: Callable[[str], None] = lambda text: None
    clock: Callable[[], float] = time.time
    checks: dict[tuple[str, str, str], QuotaCheck] = field(default_factory=dict)
    _sources: dict[str, QuotaSource | None] = field(default_factory=dict)
    _reads: dict[tuple[str, str], tuple[Usage, float] | str] = field(default_factory=dict)

    def check(self, offer: QuotaShape) -> QuotaCheck:
        """The verdict for ``offer``'s machine (a candidate's ``Shape``, or an ``Offer``: only the machine is read)."""
        key = (offer.cloud, offer.region, offer.instance_type)
        if key not in self.checks:
            self.checks[key] = self._check(offer)
            if self.checks[key].status == "unknown" and self.checks[key].readings:  # a read failed
                self.warn(f"{self.checks[key].message()}; `up` tries it as it would without the check")
        return self.checks[key]

    def skip_reason(self, offer: QuotaShape) -> str | None:
        """The failover hook: why ``offer``'s region has no headroom (None: try it)."""
        check = self.check(offer)
        return check.message() if check.status == "short" else None

    def to_json(self) -> list[dict[str, object]]:
        return [c.to_json() for c in self.checks.values()]

    def _source(self, cloud: str) -> QuotaSource | None:
        if cloud not in self._sources:
            provider = self.providers.get(cloud)
            self._sources[cloud] = None if provider is None else quota_source(cloud, provider)
        return self._sources[cloud]

    def _usage(self, src: QuotaSource, scope: str) -> tuple[Usage, float] | str:
        """One scope's quotas and when they were read, or why they could not be read (read once per run)."""
        key = (src.cloud, scope)
        if key not in self._reads:
            try:
                self._reads[key] = _cached_read(src, scope, self.clock)
            except Exception as exc:  # noqa: BLE001 - any failed read degrades to "not checked", never to "no quota"
                self._reads[key] = failure_words(exc)  # its words: no Python type name, no HTML page
        return self._reads[key]

    def _check(self, offer: QuotaShape) -> QuotaCheck:
        base = (offer.cloud, offer.region, offer.instance_type)
        if offer.cloud not in self.providers:
            return QuotaCheck(*base, status="unknown", note="no credentials for this cloud")
        src = self._source(offer.cloud)
        if src is None:
            return QuotaCheck(*base, status="unknown", note="trainvm cannot read this cloud's quotas")

        def usage_of(scope: str) -> Usage:
            got = self._usage(src, scope)
            return {} if isinstance(got, str) else got[0]

        readings = []
        now = oldest = self.clock()
        for need in src.needs(offer, self.spot, self.nodes, usage_of):
            got = self._usage(src, need.scope)
            if isinstance(got, str):
                readings.append(QuotaReading(need, None, None, source=src.source, read_at=now,
                                             error=f"the quota read failed: {got}"))
                continue
            usage, read_at = got
            oldest = min(oldest, read_at)
            if need.unread:  # a quota the offer counts against, with no metric to read: the check is not "ok"
                readings.append(QuotaReading(need, None, None, source=src.source, read_at=read_at, error=need.unread))
                continue
            limit, used = usage.get(need.metric, (None, None))
            readings.append(QuotaReading(need, limit, used, source=src.source, read_at=read_at,
                                         error=None if limit is not None else "not reported"))
        failed = [r.error for r in readings if r.error and r.error != "not reported"]
        status: Literal["ok", "short", "unknown"] = (
            "short" if any(r.short for r in readings) else "unknown" if failed else "ok")
        hint = src.increase_hint
        hint_for = getattr(src, "hint_for", None)  # optional: a hint naming the quotas and values (AWS's CLI call)
        if status == "short" and hint_for is not None:
            hint = hint_for([r for r in readings if r.short], offer.region)
        return QuotaCheck(*base, status=status, readings=tuple(readings), increase_hint=hint,
                          age_s=max(0.0, now - oldest), note=failed[0] if failed else None)


def _cache_path(src: QuotaSource, scope: str) -> Path:
    digest = hashlib.sha256(f"{src.cloud}:{src.account}:{scope}".encode()).hexdigest()[:24]
    return cache_dir() / "quota" / f"{src.cloud}-{digest}.json"


def _cached_read(src: QuotaSource, scope: str, clock: Callable[[], float]) -> tuple[Usage, float]:
    """``src.read(scope)`` and the time it was read, from the cache when younger than ``CACHE_SECONDS``."""
    use_cache = not settings.is_set("TRAINVM_NO_CACHE")
    path = _cache_path(src, scope)
    now = clock()
    if use_cache:
        try:
            doc = json.loads(path.read_text())
            if 0 <= now - float(doc["read_at"]) < CACHE_SECONDS:
                return {m: (float(v[0]), float(v[1])) for m, v in doc["quotas"].items()}, float(doc["read_at"])
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            pass
    usage = dict(src.read(scope))
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".quota-")
            with os.fdopen(fd, "w") as fh:
                json.dump({"read_at": now, "cloud": src.cloud, "scope": scope, "quotas": usage}, fh)
            os.replace(tmp, path)
        except OSError:
            pass
    return usage, now
