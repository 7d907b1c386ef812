"""Multi-node facts per machine family (data/placement.yaml, each with its source): whether the cloud
can place N nodes of a family compactly, and which inter-node fabric a shape offers and what the guest
needs to use it. Pure data: importing this module imports no SDK. Cloud-neutral code reaches it
through ``providers.registry.placement``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ruamel.yaml import YAML

DATA = Path(__file__).parent / "data" / "placement.yaml"


@dataclass(frozen=True, slots=True)
class Fabric:
    name: str
    label: str
    guest_needs: str | None  # None: a stock image can use it
    trainvm_installs: bool
    nccl_env: Mapping[str, str]
    source: str

    @property
    def usable(self) -> bool:
        """Can NCCL use it on a VM that trainvm's startup script set up?"""
        return self.guest_needs is None or self.trainvm_installs


@dataclass(frozen=True, slots=True)
class ShapePlacement:
    cloud: str
    family: str
    instance_type: str
    compact: bool  # the cloud can place nodes of this family compactly
    compact_with: str  # how ("a cluster placement group")
    fabric: Fabric
    interfaces: int  # fabric NICs/adapters per node (0: the primary NIC only)
    known: bool  # False: the family is not in the data (treated as no compact placement, TCP)
    note: str
    trust: str
    source: str

    def fabric_text(self, os_name: str) -> str:
        """``EFA x32 per node: ubuntu-22.04 needs ... (trainvm does not install it): NCCL uses TCP``."""
        f = self.fabric
        what = f.label + (f", {self.interfaces} per node" if self.interfaces else "")
        if f.usable:
            return what
        return (f"{what}; a stock {os_name} image lacks {f.guest_needs} and trainvm does not install them yet, "
                f"so NCCL uses TCP sockets on the primary NIC")

    def to_json(self, os_name: str) -> dict[str, Any]:
        f = self.fabric
        return {"family": self.family, "compact_supported": self.compact, "compact_with": self.compact_with,
                "fabric": f.name, "fabric_label": f.label, "interfaces": self.interfaces,
                "usable_on_image": f.usable, "image": os_name, "guest_needs": f.guest_needs,
                "nccl_transport": f.name if f.usable else "tcp", "known": self.known, "note": self.note,
                "trust": self.trust, "source": self.source, "fabric_source": f.source}


@lru_cache(maxsize=1)
def _doc() -> dict[str, Any]:
    return YAML(typ="safe").load(DATA.read_text(encoding="utf-8"))


@cache
def fabrics() -> Mapping[str, Fabric]:
    out = {}
    for name, f in _doc()["fabrics"].items():
        out[name] = Fabric(name, f["label"], f["guest_needs"], bool(f["trainvm_installs"]),
                           MappingProxyType({k: str(v) for k, v in (f.get("nccl_env") or {}).items()}), f["source"])
    return MappingProxyType(out)


def families(cloud: str) -> frozenset[str]:
    return frozenset((_doc()["clouds"].get(cloud) or {}).get("families", {}))


@lru_cache(maxsize=4096)
def shape_placement(cloud: str, family: str, instance_type: str) -> ShapePlacement:
    c = _doc()["clouds"].get(cloud) or {}
    fam = c.get("families", {}).get(family)
    fabs = fabrics()
    efa = (c.get("efa_interfaces") or {}).get(instance_type)
    if fam is None:
        return ShapePlacement(cloud, family, instance_type, False, c.get("compact_with", "-"), fabs["tcp"], 0, False,
                              f"no placement facts for {cloud} family {family!r}: treated as not compactly placeable",
                              "-", c.get("compact_source", ""))
    fabric = fabs["efa"] if efa else fabs[fam["fabric"]]
    return ShapePlacement(cloud, family, instance_type, bool(fam["compact"]), c["compact_with"], fabric,
                          int(efa or fam.get("interfaces", 0)), True, fam.get("note", ""), fam["trust"],
                          c["compact_source"])


def compactable(clouds: tuple[str, ...]) -> frozenset[tuple[str, str]]:
    """(cloud, family) pairs the cloud can place compactly; a family missing from the data is not
    among them (no promise without a source)."""
    doc = _doc()["clouds"]
    return frozenset((c, f) for c in clouds for f, v in ((doc.get(c) or {}).get("families") or {}).items()
                     if v["compact"])
