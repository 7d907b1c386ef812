"""The pure GCE request builder (gcp_request) and the error classifier (gcp_errors): no emulator."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from provisioner.providers.base import (
    AuthError,
    CapacityError,
    InvalidRequestError,
    ProviderError,
    QuotaError,
    RetryExhaustedError,
    SecretRef,
)
from provisioner.providers.gcp import errors as errs
from provisioner.providers.gcp.request import (
    SCOPE_CLOUD_PLATFORM,
    SCOPE_GCS_READ,
    firewall_bodies,
    firewall_shape,
    instance_body,
    is_trainvm_rule,
    local_ssd_count,
    request_id,
    request_preview,
    ssh_notes,
    ssh_rule_names,
    ssh_tag,
)

IMG = "projects/ubuntu-os-cloud/global/images/ubuntu-2204-jammy-v20261015"


def meta(body: dict) -> dict:
    return {i["key"]: i["value"] for i in body["metadata"]["items"]}


def test_t4_body(spec, offer):
    s = spec()
    body = instance_body(s, offer(), IMG, "p")
    assert body["machineType"] == "zones/us-central1-a/machineTypes/n1-standard-8"
    assert body["guestAccelerators"] == [{"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4",
                                          "acceleratorCount": 1}]
    assert body["scheduling"] == {"automaticRestart": False, "provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE",
                                  "instanceTerminationAction": "STOP", "maxRunDuration": {"seconds": "86400"}}
    boot = body["disks"][0]
    assert boot["boot"] and boot["autoDelete"] and len(body["disks"]) == 1
    assert boot["initializeParams"] == {"sourceImage": IMG, "diskType": "zones/us-central1-a/diskTypes/pd-balanced",
                                       "diskSizeGb": "150", "labels": s.labels}
    assert body["labels"] == s.labels and set(s.labels) == {"trainvm-managed", "trainvm-profile", "trainvm-hash", "trainvm-owner"}
    m = meta(body)
    assert m["startup-script"] == s.user_data and m["enable-guest-attributes"] == "TRUE"
    assert json.loads(m["trainvm-profile"])["name"] == "bert-finetune" and m["trainvm-hash"] == s.profile_hash
    assert m["trainvm-image"] == IMG
    assert body["networkInterfaces"] == [{"network": "projects/p/global/networks/default",
                                          "accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]}]
    assert body["serviceAccounts"][0]["email"] == "default"
    assert SCOPE_GCS_READ in body["serviceAccounts"][0]["scopes"]  # data from gs://
    assert SCOPE_CLOUD_PLATFORM not in body["serviceAccounts"][0]["scopes"]
    assert "tags" not in body and body["shieldedInstanceConfig"]["enableSecureBoot"] is False


@pytest.mark.parametrize("gpu, accel", [("V100", "nvidia-tesla-v100"), ("P100", "nvidia-tesla-p100"), ("P4", "nvidia-tesla-p4")])
def test_n1_accelerator_names(spec, offer, gpu, accel):
    body = instance_body(spec(), offer(gpu=gpu, count=2), IMG, "p")
    assert body["guestAccelerators"][0] == {"acceleratorType": f"zones/us-central1-a/acceleratorTypes/{accel}", "acceleratorCount": 2}


def test_a2_bundles_gpus_and_spot(spec, offer):
    body = instance_body(spec(spot=True, max_run_hours=None, data_sources=()), offer(instance_type="a2-highgpu-1g"), IMG, "p")
    assert "guestAccelerators" not in body
    assert body["scheduling"] == {"automaticRestart": False, "provisioningModel": "SPOT", "onHostMaintenance": "TERMINATE",
                                  "instanceTerminationAction": "STOP"}
    assert body["serviceAccounts"][0]["scopes"] == ["https://www.googleapis.com/auth/logging.write",
                                                    "https://www.googleapis.com/auth/monitoring.write",
                                                    "https://www.googleapis.com/auth/devstorage.read_only"]  # the payload


def test_on_demand_without_max_run_has_no_termination_action(spec, offer):
    sched = instance_body(spec(max_run_hours=None), offer(), IMG, "p")["scheduling"]
    assert "instanceTerminationAction" not in sched and "maxRunDuration" not in sched
    assert instance_body(spec(max_run_hours=0.001), offer(), IMG, "p")["scheduling"]["maxRunDuration"] == {"seconds": "30"}


def test_disk_types_per_family(spec, offer):
    a3 = instance_body(spec(boot_disk_type="ssd"), offer(instance_type="a3-highgpu-8g"), IMG, "p")
    assert a3["disks"][0]["initializeParams"]["diskType"].endswith("/pd-ssd")
    ultra = offer(instance_type="a3-highgpu-8g")
    ultra = type(ultra)(**{**{f: getattr(ultra, f) for f in ultra.__slots__}, "instance_type": "a3-ultragpu-8g",
                           "family": "a3-ultragpu"})
    hd = instance_body(spec(boot_disk_type="balanced"), ultra, IMG, "p")
    assert hd["disks"][0]["initializeParams"]["diskType"].endswith("/hyperdisk-balanced")
    with pytest.raises(InvalidRequestError, match="standard"):
        instance_body(spec(boot_disk_type="standard"), offer(instance_type="g2-standard-8"), IMG, "p")


@pytest.mark.parametrize("machine, gib, count", [
    ("n1-standard-8", 0, 0), ("n1-standard-8", 1, 1), ("n1-standard-8", 750, 2), ("n1-standard-8", 1000, 3),
    ("n1-standard-8", 3001, 16), ("a2-highgpu-1g", 1000, 4), ("a2-highgpu-2g", 100, 2), ("a3-highgpu-8g", 2000, 0),
    ("a3-ultragpu-8g", 500, 0), ("g2-standard-8", 375, 1),
])
def test_local_ssd_count(machine, gib, count):
    assert local_ssd_count(machine, gib) == count


def test_local_nvme_disks_and_limits(spec, offer):
    disks = instance_body(spec(local_nvme_gib=700), offer(), IMG, "p")["disks"]
    assert [d["type"] for d in disks] == ["PERSISTENT", "SCRATCH", "SCRATCH"]
    assert disks[1] == {"type": "SCRATCH", "interface": "NVME", "autoDelete": True,
                        "initializeParams": {"diskType": "zones/us-central1-a/diskTypes/local-ssd", "diskSizeGb": "375"}}
    with pytest.raises(InvalidRequestError, match="Local SSD"):
        instance_body(spec(local_nvme_gib=400), offer(instance_type="g2-standard-8"), IMG, "p")


def test_ssh_from_tag_and_notes(spec, offer):
    s = spec(ssh_from="203.0.113.7/32")
    assert instance_body(s, offer(), IMG, "p")["tags"] == {"items": [f"{s.name}-ssh"]}
    assert "tags" not in instance_body(spec(), offer(), IMG, "p")
    (note,) = ssh_notes(s)
    assert f"{s.name}-ssh-allow (allow, priority 900)" in note and f"{s.name}-ssh-deny (deny from 0.0.0.0/0, priority 910)" in note
    assert "only from 203.0.113.7/32" in note and "gcloud" not in note
    (note,) = ssh_notes(spec())
    assert "governed by the project's firewall" in note and "default-allow-ssh" in note and "--ssh-from CIDR" in note
    assert "not applied" in ssh_notes(s, tagged=False)[0] and "restricted" in ssh_notes(spec(), tagged=True)[0]
    assert "IPv6" in ssh_notes(spec(ssh_from="2001:db8::/32"))[0]


def test_firewall_bodies(spec):
    s = spec(ssh_from="203.0.113.7/32")
    allow, deny = firewall_bodies(s, "my-proj")
    common = {"network": "projects/my-proj/global/networks/default", "direction": "INGRESS", "targetTags": [f"{s.name}-ssh"]}
    assert allow == {"name": f"{s.name}-ssh-allow", **common, "priority": 900, "sourceRanges": ["203.0.113.7/32"],
                     "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}], "description": allow["description"]}
    assert deny == {"name": f"{s.name}-ssh-deny", **common, "priority": 910, "sourceRanges": ["0.0.0.0/0"],
                    "denied": [{"IPProtocol": "tcp", "ports": ["22"]}], "description": deny["description"]}
    for body in (allow, deny):
        assert body["description"].startswith("trainvm:") and s.profile_hash[:16] in body["description"]
        assert is_trainvm_rule(body, s.name) and not is_trainvm_rule(body, "other-vm")
    assert firewall_bodies(spec(), "p") == []


def test_firewall_shape_ignores_server_defaults(spec):
    from google.cloud import compute_v1

    s = spec(ssh_from="203.0.113.7/32")
    for body in firewall_bodies(s, "p"):
        compute_v1.Firewall.from_json(json.dumps(body))  # raises on an unknown field name
        stored = {**body, "network": "https://www.googleapis.com/compute/v1/projects/p/global/networks/default",
                  "kind": "compute#firewall", "id": "1", "disabled": False, "logConfig": {"enable": False},
                  "sourceTags": [], "destinationRanges": []}
        assert firewall_shape(stored) == firewall_shape(body)
        assert firewall_shape({**stored, "sourceRanges": ["198.51.100.0/24"]}) != firewall_shape(body)
        assert firewall_shape({**stored, "priority": 1000}) != firewall_shape(body)
        assert firewall_shape({**stored, "sourceTags": ["x"]}) != firewall_shape(body)


@pytest.mark.parametrize("vm", ["trainvm-bert-finetune-da801425", "a" * 63, "x" + "-" * 50 + "y" * 12, "vm"])
def test_rule_and_tag_names_fit_gce(vm):
    allow, deny = ssh_rule_names(vm)
    names = [allow, deny, ssh_tag(vm)]
    assert all(len(n) <= 63 and re.fullmatch(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?", n) for n in names), names
    assert len(set(names)) == 3 and ssh_rule_names(vm) == (allow, deny)  # deterministic
    if len(vm) <= 53:
        assert (allow, deny) == (f"{vm}-ssh-allow", f"{vm}-ssh-deny")
    else:
        assert ssh_rule_names(vm[:-1] + "z") != (allow, deny)  # cut short, but still one per VM


def test_secret_reference_adds_cloud_platform_scope(spec, offer):
    s = spec(secret_refs=(SecretRef("gcp", "hf-token"),))
    scopes = instance_body(s, offer(), IMG, "p")["serviceAccounts"][0]["scopes"]
    assert SCOPE_CLOUD_PLATFORM in scopes and SCOPE_GCS_READ not in scopes  # cloud-platform covers the payload's read


def test_every_vm_may_read_its_payload_from_gcs(spec, offer):
    """The bootstrap fetches the payload from GCS with the VM's token: devstorage.read_only without any gs:// data."""
    s = spec(data_sources=(), profile_json="{}")
    scopes = instance_body(s, offer(), IMG, "p")["serviceAccounts"][0]["scopes"]
    assert SCOPE_GCS_READ in scopes and SCOPE_CLOUD_PLATFORM not in scopes


def test_metadata_limits(spec, offer):
    with pytest.raises(InvalidRequestError, match="262144 bytes per metadata value") as e:
        instance_body(spec(user_data="x" * (256 * 1024 + 1)), offer(), IMG, "p")
    assert e.value.code == "METADATA_TOO_LARGE"
    with pytest.raises(InvalidRequestError, match="totals"):
        instance_body(spec(user_data="x" * 262_144, profile_json="{" + " " * 262_142 + "}"), offer(), IMG, "p")


def test_rejects_non_gce_offer(spec, offer):
    o = offer()
    with pytest.raises(InvalidRequestError):
        instance_body(spec(), type(o)(**{**{f: getattr(o, f) for f in o.__slots__}, "zone": None}), IMG, "p")


def test_request_preview_shows_family(spec, offer):
    body = request_preview(spec(), offer())
    assert body["disks"][0]["initializeParams"]["sourceImage"] == "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
    assert body["networkInterfaces"][0]["network"] == "projects/PROJECT/global/networks/default"


def test_body_parses_into_sdk_instance(spec, offer):
    from google.cloud import compute_v1

    body = instance_body(spec(local_nvme_gib=375, ssh_from="10.0.0.0/8"), offer(), IMG, "p")
    inst = compute_v1.Instance.from_json(json.dumps(body))  # raises on an unknown field name
    assert inst.scheduling.max_run_duration.seconds == 86400 and inst.disks[1].interface == "NVME"
    from google.protobuf.json_format import ParseError

    with pytest.raises(ParseError, match="guestAccelerator"):
        compute_v1.Instance.from_json(json.dumps({**body, "guestAccelerator": []}))


def test_request_id_is_deterministic(spec, offer):
    s, a = spec(), offer()
    assert request_id(s, a) == request_id(s, offer())
    assert request_id(s, a) != request_id(s, offer("us-central1-b"))
    assert request_id(s, a) != request_id(s, a, salt="operation-1")
    assert request_id(s, a) != request_id(spec(profile_hash="cd" * 32), a)


def test_request_id_names_the_machine_type_and_the_gpus(spec, offer):
    """Another offer in the same zone is another request: GCE must never answer a failover to another machine
    type (or GPU count) with the operation of the earlier offer's insert."""
    s, a = spec(), offer()
    assert request_id(s, a) != request_id(s, offer(instance_type="g2-standard-8"))
    assert request_id(s, a) != request_id(s, offer(count=2))
    assert request_id(s, a) != request_id(s, offer(gpu="V100"))


def test_builder_imports_no_cloud_sdk():
    code = ("import sys, provisioner.providers.gcp.request, provisioner.providers.gcp.provider; "
            "bad = sorted(m for m in sys.modules if m.startswith(('google', 'azure', 'boto'))); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------------------------- classification
def op(code, message="", status=None, metric=None):
    details = [SimpleNamespace(quota_info=SimpleNamespace(metric_name=metric))] if metric else []
    return SimpleNamespace(error=SimpleNamespace(errors=[SimpleNamespace(code=code, message=message, error_details=details)]),
                           http_error_status_code=status or 0)


@pytest.mark.parametrize("operation, cls, code, scope", [
    (op("ZONE_RESOURCE_POOL_EXHAUSTED", "The zone 'z' does not have enough resources", 503), CapacityError,
     "ZONE_RESOURCE_POOL_EXHAUSTED", None),
    (op("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"), CapacityError, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", None),
    (op("QUOTA_EXCEEDED", "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region us-central1.", 403,
        "compute.googleapis.com/nvidia_t4_gpus"), QuotaError, "QUOTA_EXCEEDED:NVIDIA_T4_GPUS", "region"),
    (op("QUOTA_EXCEEDED", "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 0.0 globally.", 403), QuotaError,
     "QUOTA_EXCEEDED:GPUS_ALL_REGIONS", "cloud"),
    (op("RESOURCE_NOT_FOUND", "image gone"), InvalidRequestError, "RESOURCE_NOT_FOUND", None),
    (op("INTERNAL_ERROR", "boom", 500), RetryExhaustedError, "500", None),
    (op("SOMETHING_ELSE", "odd"), ProviderError, "SOMETHING_ELSE", None),
])
def test_classify_operation_errors(operation, cls, code, scope):
    exc = errs.classify(errs.from_operation(operation))
    assert type(exc) is cls and exc.code == code
    if scope:
        assert exc.scope == scope


def http_exc(status, reason, message):
    from google.api_core import exceptions as gexc

    return gexc.from_http_status(status, f"POST http://x/compute/v1/projects/p/zones/z/instances: {message}",
                                 errors=[{"reason": reason, "message": message}])


@pytest.mark.parametrize("status, reason, message, cls, retry", [
    (403, "quotaExceeded", "Quota 'NVIDIA_L4_GPUS' exceeded.  Limit: 0.0 in region us-central1.", QuotaError, False),
    (429, "rateLimitExceeded", "Rate Limit Exceeded", RetryExhaustedError, True),
    (403, "rateLimitExceeded", "Rate Limit Exceeded", RetryExhaustedError, True),
    (503, "backendError", "Internal error", RetryExhaustedError, True),
    (503, "resourcePoolExhausted", "The zone 'z' does not have enough resources available", CapacityError, False),
    # a group's bulkInsert refused up front (troubleshooting-bulk-vm-creation, "Insufficient capacity"): next zone
    (503, "insufficientCapacity", "Insufficient capacity in zone z", CapacityError, False),
    (401, "required", "Request is missing required authentication credential", AuthError, False),
    (403, "forbidden", "Required 'compute.instances.create' permission", AuthError, False),
    (400, "invalid", "Invalid value for field 'resource.name'", InvalidRequestError, False),
])
def test_classify_http_errors(status, reason, message, cls, retry):
    f = errs.from_exception(http_exc(status, reason, message))
    assert errs.is_retryable(f) is retry
    exc = errs.classify(f)
    assert type(exc) is cls and not str(exc).startswith("POST ")


def test_classify_auth_and_network_exceptions():
    import google.auth.exceptions
    import requests

    f = errs.from_exception(google.auth.exceptions.RefreshError("token expired"))
    assert f.kind == "auth" and isinstance(errs.classify(f), AuthError)
    f = errs.from_exception(requests.exceptions.ConnectionError("reset"))
    assert errs.is_retryable(f) and isinstance(errs.classify(f, retried=4), RetryExhaustedError)


def test_compute_scope_only_when_the_vm_deletes_itself(spec, offer):
    from provisioner.providers.gcp.request import SCOPE_COMPUTE

    assert SCOPE_COMPUTE not in instance_body(spec(), offer(), IMG, "p")["serviceAccounts"][0]["scopes"]
    assert SCOPE_COMPUTE in instance_body(spec(on_idle="delete"), offer(), IMG, "p")["serviceAccounts"][0]["scopes"]
