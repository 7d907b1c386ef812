"""The records of the quota preflight that a cloud's quota reader fills (providers/<cloud>/quota.py) and
provision/quota.py weighs: what an offer needs of one metric (``QuotaNeed``), one metric as read (``QuotaReading``),
what a reader returns (``QuotaSource``). They live beside the provider contract so that a cloud package imports
nothing from provision/ (issue 37: providers import nothing above them). Pure data, no SDK."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

GLOBAL = "global"  # the scope of account-wide metrics (GCE GPUS_ALL_REGIONS)
Usage = Mapping[str, tuple[float, float]]  # metric -> (limit, usage)


class QuotaShape(Protocol):
    """What a quota reader reads of the offer it weighs: the machine (``providers.offer.Shape``, which the plan's
    candidates carry; an ``Offer`` has the same fields), never its prices."""

    @property
    def cloud(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def vcpus(self) -> float: ...
    @property
    def gpu_name(self) -> str: ...
    @property
    def gpu_count(self) -> int: ...


@dataclass(frozen=True)
class QuotaNeed:
    """What one offer asks of one quota metric: ``amount`` (vCPUs or GPUs per node x nodes) in ``scope``."""

    metric: str
    scope: str  # a region, or GLOBAL
    amount: float
    label: str  # "T4 GPUs", "NCASv3_T4 family vCPUs"
    unread: str | None = None  # why this quota cannot be read (the cloud lists no metric trainvm can name): not checked


@dataclass(frozen=True)
class QuotaReading:
    need: QuotaNeed
    limit: float | None
    usage: float | None
    source: str  # the API read ("GCE regions.get")
    read_at: float  # epoch seconds
    error: str | None = None  # why it could not be read (then limit/usage are None)

    @property
    def headroom(self) -> float | None:
        return None if self.limit is None or self.usage is None else max(0.0, self.limit - self.usage)

    @property
    def short(self) -> bool:
        return self.headroom is not None and self.headroom < self.need.amount

    def text(self, region: str) -> str:
        n = self.need
        where = "in all regions" if n.scope == GLOBAL else f"in {region}"
        if self.headroom is None:
            return f"{n.metric} {where}: not checked ({self.error or 'not reported'})"
        label = n.label[:-1] if n.amount == 1 and n.label.endswith("s") else n.label  # labels are plural: "T4 GPUs"
        return (f"{_num(n.amount)} {label} needed, {_num(self.headroom)} free {where} "
                f"({n.metric}: limit {_num(self.limit)}, {_num(self.usage)} in use)")

    def to_json(self) -> dict[str, object]:
        return {"metric": self.need.metric, "scope": self.need.scope, "need": self.need.amount, "label": self.need.label,
                "limit": self.limit, "usage": self.usage, "headroom": self.headroom, "short": self.short,
                "source": self.source, "read_at": self.read_at, "error": self.error}


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


class QuotaSource(Protocol):
    """What a cloud's quota reader returns for one provider (providers/*_quota.py)."""

    cloud: str
    account: str  # the project / subscription / account the quotas belong to (the cache key)
    source: str  # the API, in words
    increase_hint: str

    def read(self, scope: str) -> Usage: ...

    def needs(self, offer: QuotaShape, spot: bool, nodes: int, usage_of: Callable[[str], Usage]) -> list[QuotaNeed]: ...

    # optional: ``hint_for(short_readings, region) -> str``, the increase hint naming the quotas and the values that
    # would fit (AWS: the `aws service-quotas request-service-quota-increase` call); else ``increase_hint``
