"""Request validation for the Compute Engine emulator (tests/emulators/gce.py).

Three layers, each raising or returning Google-style messages:
- `Discovery`: schema checks against Compute's published discovery document
  (tests/fixtures/gce/compute.v1.json): unknown fields, JSON types, int64-as-string, enums, patterns,
  output-only fields, `annotations.required` for a method, and path/query parameters of a method.
- `check_instance`: the Compute Engine rules that the schema cannot express (zonal URLs, boot disk,
  labels, metadata sizes, GPU host maintenance, Spot scheduling).
- `compile_filter` (gce_filter.py): the list-filter language (`labels.k = v`, `!=`, `:`, `:*`, `eq`/`ne` regex,
  parentheses, implicit or explicit AND, OR).
- Wire shapes (pure functions): the fault catalog (HTTP_FAULTS, OP_FAULTS), failed-operation errors
  (gce_faults.py), the Operation / Instance / Image resources, pagination and aggregatedList scopes the
  emulator returns (gce_resources.py).
  Error texts follow Google's documented/quoted messages; exact wording of the real API is approximated.
"""
from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "fixtures" / "gce" / "compute.v1.json"
STANDARD_PARAMS = {"$.xgafv", "access_token", "alt", "callback", "fields", "key", "oauth_token",
                   "prettyPrint", "quotaUser", "uploadType", "upload_protocol", "userIp"}
PROTO_TYPES = {"boolean": "TYPE_BOOL", "integer": "TYPE_INT32", "number": "TYPE_DOUBLE", "string": "TYPE_STRING"}
INT_RANGES = {"int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1), "uint64": (0, 2**64 - 1)}
URL_PREFIXES = ("https://www.googleapis.com/compute/v1/", "https://compute.googleapis.com/compute/v1/")
MACHINE_FAMILIES = {"n1", "n2", "n2d", "n4", "e2", "f1", "g1", "c2", "c2d", "c3", "c3d", "c4", "c4a", "c4d", "m1", "m2",
                    "m3", "m4", "t2a", "t2d", "h3", "z3", "a2", "a3", "a4", "a4x", "g2", "g4"}
GPU_FAMILIES = ("a2-", "a3-", "a4-", "a4x-", "g2-", "g4-")
N1_ACCELERATORS = {"nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4", "nvidia-tesla-k80",
                   "nvidia-tesla-t4-vws", "nvidia-tesla-p100-vws", "nvidia-tesla-p4-vws"}
DISK_TYPES = {"pd-standard", "pd-balanced", "pd-ssd", "pd-extreme", "hyperdisk-balanced", "hyperdisk-extreme",
              "hyperdisk-throughput", "hyperdisk-ml", "local-ssd"}
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
NETWORK_TAG = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
METADATA_VALUE_MAX = 256 * 1024
METADATA_TOTAL_MAX = 512 * 1024


class ApiError(Exception):
    """An HTTP error in Google's JSON shape: {"error": {"code", "message", "errors": [...]}}."""

    def __init__(self, code: int, reason: str, messages, domain: str = "global", status: str | None = None):
        self.code, self.reason, self.domain, self.status = code, reason, domain, status
        self.messages = [messages] if isinstance(messages, str) else list(messages)
        super().__init__(f"{code} {reason}: {self.messages[0]}")

    def payload(self) -> dict:
        err = {"code": self.code, "message": self.messages[0],
               "errors": [{"message": m, "domain": self.domain, "reason": self.reason} for m in self.messages]}
        if self.status:
            err["status"] = self.status
        return {"error": err}


def invalid(messages) -> ApiError:
    return ApiError(400, "invalid", messages)


@functools.cache
def _load(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


class Discovery:
    """Schema validator over the discovery document (loaded once per process, ~0.1 s)."""

    def __init__(self, path: Path | str = DOC, reject_output_only: bool = True):
        self.doc = _load(str(path))
        self.schemas = self.doc["schemas"]
        self.reject_output_only = reject_output_only

    def method(self, method_id: str) -> dict:
        _, resource, name = method_id.split(".")
        return self.doc["resources"][resource]["methods"][name]

    def check_params(self, method_id: str, path_params: dict, query: dict, extra=()) -> list[str]:
        params, errs = self.method(method_id)["parameters"], []
        for k, v in path_params.items():
            pat = params[k].get("pattern")
            if pat and not re.fullmatch(pat, v):
                errs.append(f"Invalid value for field '{k}': '{v}'. Must be a match of regex '{pat}'")
        for k, v in query.items():
            if k in STANDARD_PARAMS or k in extra:
                continue
            spec = params.get(k)
            if spec is None or spec.get("location") != "query":
                errs.append(f'Invalid JSON payload received. Unknown name "{k}": Cannot bind query parameter. '
                            f"Field '{k}' could not be found in request message.")
            else:
                errs += self._scalar(spec, v, k, query=True)
        return errs

    def check_body(self, schema: str, body, method_id: str | None = None, root: str = "resource") -> list[str]:
        errs: list[str] = []
        self._walk({"$ref": schema}, body, root, method_id, errs)
        return errs

    def _walk(self, spec: dict, value, path: str, mid: str | None, errs: list[str]) -> None:
        if "$ref" in spec:
            spec = self.schemas[spec["$ref"]]
        if value is None:  # JSON null means "unset" in proto3 JSON
            return
        kind = spec.get("type")
        if kind == "object":
            if not isinstance(value, dict):
                errs.append(f"Invalid value at '{path}' (type.googleapis.com/{spec.get('id', 'object')}), {json.dumps(value)}")
                return
            props, extra = spec.get("properties"), spec.get("additionalProperties")
            if props is None:
                for k, v in value.items():
                    if extra is not None:
                        self._walk(extra, v, f"{path}.{k}", mid, errs)
                return
            for k, v in value.items():
                sub = props.get(k)
                if sub is None:
                    errs.append(f"Invalid JSON payload received. Unknown name \"{k}\" at '{path}': Cannot find field.")
                elif sub.get("readOnly") and self.reject_output_only:
                    errs.append(f"Invalid value for field '{path}.{k}': {json.dumps(v)}. "
                                "This field is output only and cannot be set in a request.")
                else:
                    self._walk(sub, v, f"{path}.{k}", mid, errs)
            if mid:
                for k, sub in props.items():
                    if mid in sub.get("annotations", {}).get("required", ()) and value.get(k) is None:
                        errs.append(f"Required field '{path}.{k}' not specified")
        elif kind == "array":
            if not isinstance(value, list):
                errs.append(f"Invalid value at '{path}' (type.googleapis.com/list), {json.dumps(value)}")
                return
            for i, item in enumerate(value):
                self._walk(spec["items"], item, f"{path}[{i}]", mid, errs)
        elif kind != "any":
            errs += self._scalar(spec, value, path)

    @staticmethod
    def _scalar(spec: dict, v, path: str, query: bool = False) -> list[str]:
        kind, fmt = spec.get("type"), spec.get("format")
        bad = [f"Invalid value at '{path}' ({PROTO_TYPES.get(kind, kind)}), {json.dumps(v)}"]
        if isinstance(v, bool) and kind != "boolean":
            return bad
        if kind == "boolean":
            return [] if (v in ("true", "false") if query else isinstance(v, bool)) else bad
        if kind == "number":
            if isinstance(v, (int, float)):
                return []
            try:
                float(v)
                return []
            except (TypeError, ValueError):
                return bad
        if kind == "integer" or fmt in INT_RANGES:
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if isinstance(v, str) and re.fullmatch(r"-?[0-9]+", v):
                v = int(v)
            if not isinstance(v, int):
                return bad
            lo, hi = INT_RANGES.get(fmt, INT_RANGES["int32"])
            lo, hi = int(spec.get("minimum", lo)), int(spec.get("maximum", hi))
            return [] if lo <= v <= hi else [f"Invalid value for field '{path}': '{v}'. Must be in [{lo}, {hi}]"]
        if not isinstance(v, str):
            return bad
        if fmt == "byte":
            try:
                base64.b64decode(v.replace("-", "+").replace("_", "/"), validate=True)
            except (binascii.Error, ValueError):
                return bad
        if "enum" in spec and v not in spec["enum"]:
            return [f"Invalid value at '{path}' (type.googleapis.com/google.cloud.compute.v1.{path.rsplit('.', 1)[-1]}), "
                    f"\"{v}\" (allowed: {', '.join(spec['enum'])})"]
        if "pattern" in spec and not re.fullmatch(spec["pattern"], v):
            return [f"Invalid value for field '{path}': '{v}'. Must be a match of regex '{spec['pattern']}'"]
        return []


def relative(url: str) -> str:
    for prefix in URL_PREFIXES:
        if url.startswith(prefix):
            return url[len(prefix):]
    return url


def zonal_name(url: str, project: str, zone: str, collection: str) -> str | None:
    """Name of `[https://.../compute/v1/][projects/P/]zones/Z/<collection>/NAME` when P and Z match."""
    m = re.fullmatch(rf"(?:projects/([^/]+)/)?zones/([^/]+)/{collection}/([^/]+)", relative(url))
    if not m or m.group(1) not in (None, project) or m.group(2) != zone:
        return None
    return m.group(3)


def check_instance(body: dict, project: str, zone: str, networks=("default",)) -> None:
    """Raise ApiError(400) listing every Compute Engine rule the Instance body breaks."""
    errs: list[str] = []

    def bad(field: str, value, why: str) -> None:
        errs.append(f"Invalid value for field 'resource.{field}': '{value}'. {why}")

    mt_url = body.get("machineType")
    machine = zonal_name(mt_url, project, zone, "machineTypes") if isinstance(mt_url, str) else None
    if not mt_url:
        errs.append("Required field 'resource.machineType' not specified")
    elif machine is None:
        bad("machineType", mt_url, f"Invalid URL: expected [projects/{project}/]zones/{zone}/machineTypes/NAME "
                                   "(the zone must be the instance's zone).")
    elif machine.split("-")[0] not in MACHINE_FAMILIES or "-" not in machine:
        bad("machineType", mt_url, f"Machine type with name '{machine}' does not exist in zone '{zone}'.")
    machine = machine or ""

    accels = body.get("guestAccelerators") or []
    for i, acc in enumerate(accels):
        at = acc.get("acceleratorType", "")
        name = zonal_name(at, project, zone, "acceleratorTypes")
        if name is None:
            bad(f"guestAccelerators[{i}].acceleratorType", at,
                f"Invalid URL: expected [projects/{project}/]zones/{zone}/acceleratorTypes/NAME.")
        elif name not in N1_ACCELERATORS:
            bad(f"guestAccelerators[{i}].acceleratorType", at,
                f"Accelerator type '{name}' cannot be attached as guestAccelerators (not an N1 GPU).")
        if int(acc.get("acceleratorCount") or 0) not in (1, 2, 4, 8):
            bad(f"guestAccelerators[{i}].acceleratorCount", acc.get("acceleratorCount"), "Must be 1, 2, 4 or 8.")
    if accels and machine and not machine.startswith("n1-"):
        bad("guestAccelerators", accels[0].get("acceleratorType"),
            f"Machine type '{machine}' does not support guestAccelerators; only N1 machine types do "
            "(A2/A3/A4/G2 machine types include their GPUs).")

    sched = body.get("scheduling") or {}
    spot = sched.get("provisioningModel") == "SPOT" or sched.get("preemptible") is True
    ohm = sched.get("onHostMaintenance")
    if (accels or machine.startswith(GPU_FAMILIES)) and ohm != "TERMINATE":
        bad("scheduling.onHostMaintenance", ohm or "MIGRATE",
            "Instances with guest accelerators do not support live migration; set onHostMaintenance to TERMINATE.")
    if spot and sched.get("automaticRestart") is True:
        bad("scheduling.automaticRestart", "true", "Preemptible instances cannot be automatically restarted.")
    if spot and ohm == "MIGRATE":
        bad("scheduling.onHostMaintenance", ohm, "Scheduling must have preemptible be false when OnHostMaintenance isn't TERMINATE.")
    mrd = sched.get("maxRunDuration")
    if (mrd or sched.get("terminationTime")) and not sched.get("instanceTerminationAction"):
        bad("scheduling.instanceTerminationAction", "", "instanceTerminationAction (STOP or DELETE) must be set "
                                                        "when maxRunDuration or terminationTime is set.")
    if mrd and not 30 <= int(mrd.get("seconds") or 0) <= 120 * 86400:
        bad("scheduling.maxRunDuration.seconds", mrd.get("seconds"), "maxRunDuration must be between 30 s and 120 days.")
    if sched.get("instanceTerminationAction") and not (spot or mrd or sched.get("terminationTime")):
        bad("scheduling.instanceTerminationAction", sched["instanceTerminationAction"],
            "instanceTerminationAction can only be set for SPOT instances or with maxRunDuration/terminationTime.")

    labels = body.get("labels") or {}
    if len(labels) > 64:
        bad("labels", "", "At most 64 labels are allowed.")
    for k, v in labels.items():
        if not LABEL_KEY.fullmatch(k):
            bad("labels", k, f"Label key '{k}' violates format constraints. The key must start with a lowercase "
                             "letter, can only contain lowercase letters, numeric characters, underscores and dashes, "
                             "and can be at most 63 characters long.")
        if not isinstance(v, str) or not LABEL_VALUE.fullmatch(v):
            bad("labels", v, f"Label value '{v}' violates format constraints. The value can only contain lowercase "
                             "letters, numeric characters, underscores and dashes. The value can be at most 63 characters long.")

    for i, tag in enumerate((body.get("tags") or {}).get("items") or []):
        if not isinstance(tag, str) or not NETWORK_TAG.fullmatch(tag):
            bad(f"tags.items[{i}]", tag, f"Network tags must be a match of regex '{NETWORK_TAG.pattern}' (1-63 characters).")

    items = (body.get("metadata") or {}).get("items") or []
    seen, total = set(), 0
    for i, item in enumerate(items):
        key, value = item.get("key"), item.get("value") or ""
        if key in seen:
            bad(f"metadata.items[{i}].key", key, f"Duplicate metadata key '{key}'.")
        seen.add(key)
        size = len(str(value).encode())
        total += size + len(str(key).encode())
        if size > METADATA_VALUE_MAX:
            bad(f"metadata.items[{i}].value", f"<{size} bytes>", f"Metadata value for key '{key}' exceeds {METADATA_VALUE_MAX} bytes.")
    if total > METADATA_TOTAL_MAX:
        bad("metadata", f"<{total} bytes>", f"Metadata exceeds the total limit of {METADATA_TOTAL_MAX} bytes.")

    disks = body.get("disks") or []
    boots = [i for i, d in enumerate(disks) if d.get("boot")]
    if not disks or not boots:
        bad("disks", "", "No boot disk specified: exactly one disk must have boot=true.")
    elif len(boots) > 1:
        bad("disks", "", f"Only one boot disk is allowed, found {len(boots)} (disks {boots}).")
    elif boots[0] != 0:
        bad("disks", "", "Boot disk must be the first disk attached to the instance.")
    for i, d in enumerate(disks):
        init = d.get("initializeParams") or {}
        if d.get("boot") and not (d.get("source") or init.get("sourceImage") or init.get("sourceSnapshot")):
            bad(f"disks[{i}]", "", "Boot disk needs initializeParams.sourceImage, sourceSnapshot or source.")
        if init.get("diskType"):
            dt = zonal_name(init["diskType"], project, zone, "diskTypes")
            if dt not in DISK_TYPES:
                bad(f"disks[{i}].initializeParams.diskType", init["diskType"],
                    f"Expected [projects/{project}/]zones/{zone}/diskTypes/NAME with NAME in {sorted(DISK_TYPES)}.")
        size = init.get("diskSizeGb", d.get("diskSizeGb"))
        if d.get("boot") and size is not None and int(size) < 10:
            bad(f"disks[{i}].initializeParams.diskSizeGb", size, "Requested disk size cannot be smaller than the image size (10 GB).")

    nics = body.get("networkInterfaces") or []
    if not nics:
        bad("networkInterfaces", "", "At least one network interface is required.")
    for i, nic in enumerate(nics):
        net = nic.get("network")
        m = re.fullmatch(r"(?:projects/([^/]+)/)?global/networks/([^/]+)", relative(net)) if net else None
        if net and (not m or m.group(1) not in (None, project) or m.group(2) not in networks):
            bad(f"networkInterfaces[{i}].network", net, f"The referenced network was not found (known: {list(networks)}).")
        if len(nic.get("accessConfigs") or []) > 1:
            bad(f"networkInterfaces[{i}].accessConfigs", "", "At most one access config per network interface.")
    if errs:
        raise invalid(errs)
