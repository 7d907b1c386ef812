"""The Compute Engine emulator's fault catalog (HTTP_FAULTS, OP_FAULTS) and the errors they produce: Google-style
HTTP errors and the error fields of a failed operation. Pure functions, no state."""
from __future__ import annotations

from .gce_resources import region_of
from .gce_validate import ApiError

# kind: (HTTP status, reason, domain, message template, status)
HTTP_FAULTS = {
    "auth_401": (401, "required", "global", "Request is missing required authentication credential. Expected OAuth 2 "
                 "access token, login cookie or other valid authentication credential.", "UNAUTHENTICATED"),
    "permission_403": (403, "forbidden", "global", "Required '{permission}' permission for '{resource}'", None),
    "invalid_400": (400, "invalid", "global", "{message}", None),
    "quota_403": (403, "quotaExceeded", "usageLimits", "{quota_message}", None),
    "rate_429": (429, "rateLimitExceeded", "usageLimits", "Rate Limit Exceeded", "RESOURCE_EXHAUSTED"),
    # bulkInsert past the project's limits: "you reached the 20 request per second request limit or you have more
    # than 10 bulk operations running at the same time. API response fields: HTTP 403 "reason": "rateLimitExceeded"
    # ... wait until some requests complete and try your request again"
    # (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-bulk-vm-creation); domain and message
    # as the 429's
    "rate_403": (403, "rateLimitExceeded", "usageLimits", "Rate Limit Exceeded", None),
    "unavailable_503": (503, "backendError", "global", "Internal error. Please try again or contact Google Support. "
                        "(Code: '5C3A1B2D0E4F6')", None),
}
# kind: (operation error code, httpErrorStatusCode, httpErrorMessage); None: the operation never finishes
OP_FAULTS = {
    "stockout_op": ("ZONE_RESOURCE_POOL_EXHAUSTED", 503, "SERVICE UNAVAILABLE"),
    "stockout_op_bare": ("ZONE_RESOURCE_POOL_EXHAUSTED", None, None),
    "stockout_details": ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", 503, "SERVICE UNAVAILABLE"),
    "quota_op": ("QUOTA_EXCEEDED", 403, "FORBIDDEN"),
    "quota_op_global": ("QUOTA_EXCEEDED", 403, "FORBIDDEN"),
    "op_never_done": None,
}


def quota_message(metric: str, region: str | None) -> str:
    where = f"in region {region}" if region and metric != "GPUS_ALL_REGIONS" else "globally"
    return f"Quota '{metric}' exceeded.  Limit: 0.0 {where}."


def http_fault_error(kind: str, params: dict, project: str | None, zone: str | None,
                     method_id: str = "compute.instances.insert") -> ApiError:
    code, reason, domain, msg, status = HTTP_FAULTS[kind]
    _, collection, verb = method_id.split(".")
    permission = f"compute.{collection}.{ {'insert': 'create', 'aggregatedList': 'list'}.get(verb, verb)}"
    resource = f"projects/{project}/zones/{zone}/{collection}" if zone else f"projects/{project}/global/{collection}"
    region = params.get("region", region_of(zone) if zone else None)  # a global method: a project-wide quota
    text = msg.format(project=project, permission=permission, resource=resource,
                      message=params.get("message", "Invalid value for field 'resource': ''. Injected invalid_400 fault."),
                      quota_message=quota_message(params.get("metric", "GPUS_ALL_REGIONS"), region))
    return ApiError(code, reason, text, domain, status)


def op_error(kind: str, params: dict, project: str, zone: str | None) -> dict:
    """The fields a failed operation gets once DONE: error.errors[] (+ httpError* unless bare). ``zone`` is None
    for a global operation (a firewall rule): a regional quota kind then reads as the project-wide one."""
    code, http_code, http_msg = OP_FAULTS[kind]
    where = f"The zone 'projects/{project}/zones/{zone}' does not have enough resources available to fulfill the request."
    error = {"code": code, "message": f"{where}  Try a different zone, or try again later."}
    if code.endswith("_WITH_DETAILS"):
        error["message"] = f"{where}  '(resource type:compute)'."
        error["errorDetails"] = [{"localizedMessage": {"locale": "en-US", "message": error["message"]}}]
    if code == "QUOTA_EXCEEDED":
        glob = kind == "quota_op_global" or zone is None
        metric = params.get("metric", "GPUS_ALL_REGIONS" if glob else "NVIDIA_T4_GPUS")
        region = None if glob else params.get("region", region_of(zone))
        error["message"] = quota_message(metric, region)
        error["errorDetails"] = [{"quotaInfo": {
            "metricName": f"compute.googleapis.com/{metric.lower()}", "limit": 0.0,
            "limitName": f"{metric.replace('_', '-')}-per-project" + ("" if glob else "-region"),
            "dimensions": {} if glob else {"region": region}}}]
    if params.get("message"):
        error["message"] = params["message"]
    out = {"error": {"errors": [error]}}
    if http_code and not params.get("bare"):
        out.update(httpErrorStatusCode=http_code, httpErrorMessage=http_msg)
    return out
