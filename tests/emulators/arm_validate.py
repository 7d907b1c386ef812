"""Request-body validation for the ARM emulator (tests/emulators/arm.py).

A hand-written schema subset of the ARM resource types trainvm creates, covering every field that
azure-mgmt-compute 39 / -network 33 / -resource 26 put on the wire for them (recorded in
shared/knowledge/cloud-sdks.md 2.3) plus the optional fields a provider plausibly sets. Anything
else is rejected, so a typo or an unsupported field fails here instead of on the real cloud.

Behaviour, and where it departs from ARM:
- unknown member -> 400 InvalidRequestContent naming the JSON path (ARM's own wording). ARM (JSON.NET)
  matches member names case-insensitively; the emulator insists on the documented casing.
- wrong JSON type -> 400 InvalidRequestContent; enum values are matched case-insensitively as ARM does.
- read-only members (id, name, type, etag, properties.provisioningState, vmId, ipAddress, ...) are
  IGNORED, as the resource providers do; each one dropped is listed in the recorded request's `ignored`.
- a reference ({"id": ...}) may carry the other members of the referenced resource (the SDK sends a
  whole Subnet model when given one); only `id` is used.
- semantic checks (customData size, Spot-only fields, CIDRs, tags, names...) follow the real error
  codes where known; see check_* in arm_checks.py.
The schemas themselves are in arm_schemas.py.
"""
from __future__ import annotations

STR, INT, BOOL, NUM, ANY = "string", "integer", "boolean", "number", "any"
_NET_TYPES = {STR: "System.String", INT: "System.Int32", BOOL: "System.Boolean", NUM: "System.Double"}


class ArmError(Exception):
    """An ARM error response: {"error": {"code", "message", "target"?, "details"?}}."""

    def __init__(self, status, code, message, target=None, details=None, headers=None):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message
        self.target, self.details, self.headers = target, details, headers or {}

    def body(self):
        err = {"code": self.code, "message": self.message}
        if self.target:
            err["target"] = self.target
        if self.details:
            err["details"] = self.details
        return {"error": err}


class Obj:
    def __init__(self, name, fields, required=(), readonly=(), ref=False):
        self.name, self.fields, self.required = name, fields, tuple(required)
        self.readonly, self.ref = set(readonly), ref


class Arr:
    def __init__(self, item):
        self.item = item


class Enum:
    def __init__(self, name, *values):
        self.name, self.values = name, values


class MapOf:
    def __init__(self, value):
        self.value = value


def _bad_content(path, detail):
    return ArmError(400, "InvalidRequestContent", "The request content was invalid and could not be "
                    f"deserialized: '{detail} Path '{path}', line 1, position 1.'")


def required_missing(path):
    leaf = path.split(".")[-1]
    return ArmError(400, "InvalidParameter", f"Required parameter '{path}' is missing (null).", target=leaf)


def invalid(target, message, code="InvalidParameter", status=400):
    return ArmError(status, code, message, target=target)


def validate(spec, value, path="", ignored=None):
    """Return `value` with read-only members removed; raise ArmError on the first violation."""
    ignored = [] if ignored is None else ignored
    if value is None or spec == ANY:
        return value
    if isinstance(spec, Obj):
        if not isinstance(value, dict):
            raise _bad_content(path, f"Error converting value {value!r} to type '{spec.name}'.")
        out = {}
        for key, val in value.items():
            sub = f"{path}.{key}" if path else key
            if key in spec.readonly or (spec.ref and key != "id"):
                ignored.append(sub)
                continue
            if key not in spec.fields:
                raise _bad_content(sub, f"Could not find member '{key}' on object of type '{spec.name}'.")
            out[key] = validate(spec.fields[key], val, sub, ignored)
        for key in spec.required:
            if out.get(key) in (None, "", []):
                raise required_missing(f"{path}.{key}" if path else key)
        return out
    if isinstance(spec, Arr):
        if not isinstance(value, list):
            raise _bad_content(path, "Cannot deserialize the current JSON value into type 'List'.")
        return [validate(spec.item, v, f"{path}[{i}]", ignored) for i, v in enumerate(value)]
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise _bad_content(path, "Cannot deserialize the current JSON value into type 'Dictionary'.")
        return {k: validate(spec.value, v, f"{path}.{k}", ignored) for k, v in value.items()}
    if isinstance(spec, Enum):
        if not isinstance(value, str) or value.lower() not in {v.lower() for v in spec.values}:
            raise _bad_content(path, f"Error converting value {value!r} to type '{spec.name}'. "
                               f"Allowed values: {', '.join(spec.values)}.")
        return value
    ok = {STR: isinstance(value, str), BOOL: isinstance(value, bool),
          INT: isinstance(value, int) and not isinstance(value, bool),
          NUM: isinstance(value, (int, float)) and not isinstance(value, bool)}[spec]
    if not ok:
        raise _bad_content(path, f"Error converting value {value!r} to type '{_NET_TYPES[spec]}'.")
    return value
