"""EC2's tag restrictions, which moto does not all enforce, checked by the fault proxy (aws_faults) before a
request reaches moto.

Real EC2 (EC2 User Guide, "Tag restrictions" and "View tags for your EC2 instances using instance metadata"):
at most 50 user tags per resource (``aws:`` ones do not count), keys of 1..128 and values of at most 256
characters, and, when the instance has ``MetadataOptions.InstanceMetadataTags=enabled``, instance tag keys of
letters, digits and ``+ - = . , _ : @`` only, none of ``.``, ``..`` or ``_index`` ("non-compliance will result
in failed launches"). A RunInstances that breaks one launches nothing.

moto 5.2 refuses more than 50 tags with ``TagLimitExceeded`` but only after it has launched the instance (a
half-created instance real EC2 never leaves), and accepts any key or value length and any key with tags in
instance metadata. Not modelled: the exact wording of EC2's messages (the codes are EC2's: ``TagLimitExceeded``,
``InvalidParameterValue``), the character set of keys and values when tags are not in instance metadata.
"""

from __future__ import annotations

import re
from collections import defaultdict

MAX_TAGS, KEY_MAX, VALUE_MAX = 50, 128, 256
IMDS_KEY = re.compile(r"^[A-Za-z0-9+\-=.,_:@]+$")


def _tag_sets(action: str, params: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """Resource type (``*`` for CreateTags) -> its (key, value) pairs in the request."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    pat = re.compile(r"^TagSpecification\.(\d+)\.Tag\.(\d+)\.Key$" if action == "RunInstances" else r"^Tag\.()(\d+)\.Key$")
    for name, key in params.items():
        m = pat.match(name)
        if not m:
            continue
        spec, i = m.groups()
        prefix = f"TagSpecification.{spec}." if spec else ""
        rtype = params.get(f"{prefix}ResourceType", "*") if spec else "*"
        out[rtype].append((key, params.get(f"{prefix}Tag.{i}.Value", "")))
    return out


def tag_error(action: str, params: dict[str, str]) -> tuple[str, str] | None:
    """(code, message) of the error EC2 answers for the tags of this RunInstances/CreateTags, or None."""
    if action not in ("RunInstances", "CreateTags"):
        return None
    imds = action == "RunInstances" and params.get("MetadataOptions.InstanceMetadataTags") == "enabled"
    for rtype, tags in _tag_sets(action, params).items():
        if action == "RunInstances" and len([k for k, _ in tags if not k.startswith("aws:")]) > MAX_TAGS:
            return "TagLimitExceeded", "The maximum number of Tags for a resource has been reached."
        for key, value in tags:
            if not 1 <= len(key) <= KEY_MAX:
                return "InvalidParameterValue", f"Tag key exceeds the maximum length of {KEY_MAX} characters: {key[:40]}"
            if len(value) > VALUE_MAX:
                return "InvalidParameterValue", f"Tag value exceeds the maximum length of {VALUE_MAX} characters (key {key})"
            if imds and rtype == "instance" and (not IMDS_KEY.match(key) or key in (".", "..", "_index")):
                return "InvalidParameterValue", (f"The tag key '{key}' is not allowed with instance tags in instance "
                                                 "metadata (letters, digits and + - = . , _ : @ only)")
    return None
