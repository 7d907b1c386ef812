"""EC2 placement groups for the fault proxy (tests/emulators/aws_faults.py): moto 5.2.5 implements none of
``CreatePlacementGroup`` / ``DescribePlacementGroups`` / ``DeletePlacementGroup`` (its server answers 500
"not implemented") and ignores ``Placement.GroupName`` on ``RunInstances``. The proxy answers those itself,
per region (from the SigV4 credential scope), in the EC2 query protocol's XML, with the error codes of the
EC2 API reference ("Error codes for the Amazon EC2 API"):

- ``InvalidPlacementGroup.Duplicate``: CreatePlacementGroup with a name the region already has;
- ``InvalidPlacementGroup.Unknown``: Describe/Delete of a name it does not have, and RunInstances into one;
- ``InvalidPlacementGroup.InUse``: DeletePlacementGroup while an instance launched into it is not
  ``terminated`` (moto's own state, read through ``states``); EC2 refuses it the same way;
- ``InvalidParameterValue``: a strategy outside botocore's enum (cluster | spread | partition | precision-time).

Members are the instances a successful RunInstances with ``Placement.GroupName`` created; DescribeInstances
reports their ``placement.groupName``.

Not modelled: colocation itself (which racks, the bandwidth between members), that a cluster group holds one
AZ and refuses a second one, the instance types a strategy supports, partition/spread limits, EFA, and the
capacity of a group (an InsufficientInstanceCapacity is injected with ``FaultProxy.fail``). The error
messages are close to EC2's, not copied from it.
"""

from __future__ import annotations

import re
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

STRATEGIES = ("cluster", "spread", "partition", "precision-time")
NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
ACCOUNT = "123456789012"
_REGION = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/ec2/")


@dataclass
class Group:
    name: str
    strategy: str
    group_id: str
    region: str
    tags: dict[str, str]
    members: set[str] = field(default_factory=set)


@dataclass
class Answer:
    status: int
    body: bytes


def region_of(authorization: str | None) -> str:
    m = _REGION.search(authorization or "")
    return m.group(1) if m else "us-east-1"


def error(code: str, message: str, status: int = 400) -> Answer:
    return Answer(status, (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
                           f"<Message>{escape(message)}</Message></Error></Errors><RequestID>{uuid.uuid4()}</RequestID>"
                           "</Response>").encode())


def _tags_xml(tags: dict[str, str]) -> str:
    return "".join(f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>" for k, v in sorted(tags.items()))


def _group_xml(g: Group) -> str:
    return (f"<groupName>{escape(g.name)}</groupName><state>available</state><strategy>{g.strategy}</strategy>"
            f"<groupId>{g.group_id}</groupId><tagSet>{_tags_xml(g.tags)}</tagSet>"
            f"<groupArn>arn:aws:ec2:{g.region}:{ACCOUNT}:placement-group/{escape(g.name)}</groupArn>")


def _ok(action: str, inner: str) -> Answer:
    return Answer(200, (f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{NS}"><requestId>'
                        f"{uuid.uuid4()}</requestId>{inner}</{action}Response>").encode())


def _indexed(params: dict[str, str], prefix: str) -> list[str]:
    """``Prefix.1``, ``Prefix.2``, ... in order."""
    keys = sorted((int(k[len(prefix) + 1:]), v) for k, v in params.items()
                  if k.startswith(prefix + ".") and k[len(prefix) + 1:].isdigit())
    return [v for _, v in keys]


def _tag_spec(params: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 1
    while f"TagSpecification.{i}.ResourceType" in params:
        if params[f"TagSpecification.{i}.ResourceType"] == "placement-group":
            j = 1
            while f"TagSpecification.{i}.Tag.{j}.Key" in params:
                out[params[f"TagSpecification.{i}.Tag.{j}.Key"]] = params.get(f"TagSpecification.{i}.Tag.{j}.Value", "")
                j += 1
        i += 1
    return out


class PlacementGroups:
    """The placement groups of the emulated account. ``states(region, ids)``: moto's state name per instance."""

    ACTIONS = ("CreatePlacementGroup", "DescribePlacementGroups", "DeletePlacementGroup")

    def __init__(self, states: Callable[[str, set[str]], dict[str, str]] | None = None) -> None:
        self.states = states or (lambda region, ids: {})
        self.groups: dict[tuple[str, str], Group] = {}
        self.lock = threading.Lock()

    def clear(self) -> None:
        with self.lock:
            self.groups.clear()

    def names(self, region: str) -> list[str]:
        return sorted(n for r, n in self.groups if r == region)

    # ------------------------------------------------------------------ the API
    def answer(self, action: str, region: str, params: dict[str, str]) -> Answer:
        with self.lock:
            if action == "CreatePlacementGroup":
                return self._create(region, params)
            if action == "DescribePlacementGroups":
                return self._describe(region, params)
            return self._delete(region, params)

    def _create(self, region: str, params: dict[str, str]) -> Answer:
        name, strategy = params.get("GroupName", ""), params.get("Strategy", "")
        if not name:
            return error("MissingParameter", "The request must contain the parameter groupName")
        if strategy not in STRATEGIES:
            return error("InvalidParameterValue", f"Value ({strategy}) for parameter strategy is invalid.")
        if (region, name) in self.groups:
            return error("InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists.")
        g = Group(name, strategy, f"pg-{uuid.uuid4().hex[:17]}", region, _tag_spec(params))
        self.groups[(region, name)] = g
        return _ok("CreatePlacementGroup", f"<placementGroup>{_group_xml(g)}</placementGroup>")

    def _describe(self, region: str, params: dict[str, str]) -> Answer:
        names, ids = _indexed(params, "GroupName"), _indexed(params, "GroupId")
        found = [g for (r, _), g in sorted(self.groups.items()) if r == region]
        for n in names:
            if (region, n) not in self.groups:
                return error("InvalidPlacementGroup.Unknown", f"The Placement Group '{n}' is unknown.")
        if names:
            found = [g for g in found if g.name in names]
        if ids:
            found = [g for g in found if g.group_id in ids]
        items = "".join(f"<item>{_group_xml(g)}</item>" for g in found)
        return _ok("DescribePlacementGroups", f"<placementGroupSet>{items}</placementGroupSet>")

    def _delete(self, region: str, params: dict[str, str]) -> Answer:
        name = params.get("GroupName", "")
        g = self.groups.get((region, name))
        if g is None:
            return error("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
        live = [i for i, s in self.states(region, set(g.members)).items() if s != "terminated"]
        if live:
            return error("InvalidPlacementGroup.InUse", f"The placement group '{name}' is in use and may not be deleted.")
        del self.groups[(region, name)]
        return _ok("DeletePlacementGroup", "<return>true</return>")

    # ------------------------------------------------------------------ RunInstances / DescribeInstances
    def check_launch(self, region: str, params: dict[str, str]) -> Answer | None:
        """An error answer for RunInstances into a group the region does not have, else None."""
        name = params.get("Placement.GroupName")
        if name and (region, name) not in self.groups:
            return error("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")
        return None

    def launched(self, region: str, params: dict[str, str], body: bytes) -> None:
        name = params.get("Placement.GroupName")
        if not name:
            return
        with self.lock:
            g = self.groups.get((region, name))
            if g is not None:
                g.members.update(re.findall(r"<instanceId>(i-[0-9a-f]+)</instanceId>", body.decode()))

    def annotate(self, region: str, root: ET.Element) -> bool:
        """Set ``placement.groupName`` of members in a DescribeInstances answer; True when anything changed."""
        member = {i: g.name for (r, _), g in self.groups.items() if r == region for i in g.members}
        if not member:
            return False
        ns = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
        q = (lambda t: f"{{{ns}}}{t}") if ns else (lambda t: t)
        changed = False
        for item in root.iter(q("item")):
            iid, placement = item.find(q("instanceId")), item.find(q("placement"))
            if iid is None or placement is None or iid.text not in member:
                continue
            el = placement.find(q("groupName"))
            if el is None:
                el = ET.SubElement(placement, q("groupName"))
            el.text, changed = member[iid.text], True
        return changed
