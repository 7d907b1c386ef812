"""GcpProvider through the real google-cloud-compute SDK against the loopback GCE emulator."""

from __future__ import annotations

import base64
import json

import pytest

from provisioner.providers.base import (
    AuthError,
    CapacityError,
    ConflictError,
    InvalidRequestError,
    QuotaError,
    RetryExhaustedError,
)
from provisioner.providers.gcp.request import request_id

PINNED = "projects/ubuntu-os-cloud/global/images/ubuntu-2204-jammy-v20261015"


def metadata(body: dict) -> dict:
    return {i["key"]: i["value"] for i in body["metadata"]["items"]}


def rids(gce) -> list[str]:
    return [r.query.get("requestId") for r in gce.calls("instances.insert")]


# ---------------------------------------------------------------------------------------------- happy paths
def test_t4_happy_path_wire_body(gce, provider, spec, offer):
    s = spec()
    rec = provider.create(s, offer())
    (ins,) = gce.calls("instances.insert")
    body = ins.body
    assert ins.path == "/compute/v1/projects/test-proj/zones/us-central1-a/instances" and ins.status == 200
    assert ins.query["requestId"] == request_id(s, offer())
    assert body["guestAccelerators"] == [{"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4",
                                          "acceleratorCount": 1}]
    assert body["scheduling"] == {"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE", "automaticRestart": False,
                                  "instanceTerminationAction": "STOP", "maxRunDuration": {"seconds": "86400"}}
    assert body["labels"] == s.labels and body["labels"]["trainvm-hash"] == s.profile_hash[:16]
    assert set(metadata(body)) == {"startup-script", "enable-guest-attributes", "trainvm-profile", "trainvm-hash", "trainvm-image"}
    assert metadata(body)["enable-guest-attributes"] == "TRUE" and metadata(body)["startup-script"] == s.user_data
    init = body["disks"][0]["initializeParams"]
    assert init["diskType"] == "zones/us-central1-a/diskTypes/pd-balanced" and init["diskSizeGb"] == "150"
    assert init["sourceImage"] == PINNED  # pinned name, resolved from the family
    assert [r.method_id for r in gce.requests] == [
        "compute.instances.get", "compute.images.getFromFamily", "compute.instances.insert",
        "compute.zoneOperations.wait", "compute.instances.get"]  # never zoneOperations.get: no op.result() (G1)
    assert (rec.name, rec.cloud, rec.zone, rec.region, rec.instance_type, rec.state) == (
        s.name, "gcp", "us-central1-a", "us-central1", "n1-standard-8", "RUNNING")
    assert rec.profile == "bert-finetune" and rec.hash == s.profile_hash[:16] and rec.image == PINNED
    assert rec.ip.startswith("198.51.100.") and rec.created and rec.price_hourly is None
    assert not rec.adopted
    (note,) = rec.notes  # no ssh_from: no firewall rule, and `up` says who can SSH in
    assert "default-allow-ssh" in note and "--ssh-from CIDR" in note
    assert rec.ssh_command == f"gcloud compute ssh {s.name} --zone us-central1-a --project test-proj"
    assert gce.instance(s.name)["status"] == "RUNNING"


def test_a2_happy_path_bundled_gpus(gce, provider, spec, offer):
    rec = provider.create(spec(), offer("us-central1-b", "a2-highgpu-1g"))
    body = gce.calls("instances.insert")[0].body
    assert "guestAccelerators" not in body and body["machineType"] == "zones/us-central1-b/machineTypes/a2-highgpu-1g"
    assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"
    assert rec.instance_type == "a2-highgpu-1g" and rec.zone == "us-central1-b" and rec.state == "RUNNING"


def test_spot_with_local_nvme_and_ssh_tag(gce, provider, spec, offer):
    s = spec(spot=True, local_nvme_gib=700, ssh_from="203.0.113.7/32")
    rec = provider.create(s, offer())
    body = gce.calls("instances.insert")[0].body
    assert body["scheduling"]["provisioningModel"] == "SPOT" and body["scheduling"]["instanceTerminationAction"] == "STOP"
    assert body["scheduling"]["automaticRestart"] is False and body["tags"] == {"items": [f"{s.name}-ssh"]}
    stored = gce.instance(s.name)
    assert [(d["type"], d["interface"]) for d in stored["disks"]] == [("PERSISTENT", "SCSI"), ("SCRATCH", "NVME"), ("SCRATCH", "NVME")]
    assert rec.spot is True and "allowed only from 203.0.113.7/32" in rec.notes[0]
    assert "gcloud compute firewall-rules create" not in rec.notes[0]


def test_image_is_resolved_once_per_provider(gce, provider, spec, offer):
    provider.create(spec(), offer())
    provider.create(spec(profile_hash="cd" * 32), offer("us-central1-b"))
    assert len(gce.calls("images.getFromFamily")) == 1 and len(gce.instances) == 2


# ---------------------------------------------------------------------------------------------- idempotency
def test_existing_same_hash_is_returned(gce, provider, spec, offer):
    first = provider.create(spec(), offer())
    again = provider.create(spec(), offer())
    assert again.adopted is True and again.name == first.name and len(gce.calls("instances.insert")) == 1


def test_existing_other_hash_conflicts(gce, provider, spec, offer):
    provider.create(spec(), offer())
    other = spec(profile_hash="cd" * 32, name=spec().name)
    with pytest.raises(ConflictError, match="another version"):
        provider.create(other, offer())
    assert gce.instance(other.name)["labels"]["trainvm-hash"] == spec().labels["trainvm-hash"]  # untouched


def test_existing_unmanaged_vm_conflicts(gce, provider, spec, offer):
    s = spec()
    provider.create(s, offer())
    gce.instances[gce.find(s.name)]["labels"] = {"team": "x"}
    with pytest.raises(ConflictError, match="not managed by trainvm"):
        provider.create(s, offer())
    assert gce.instance(s.name) is not None


def test_killed_up_rerun_reuses_request_id(gce, provider, make_provider, spec, offer):
    s = spec()
    op = provider.submit(s, offer())  # `up` killed right after the insert call
    assert op.status != op.Status.DONE and gce.instance(s.name)["status"] == "PROVISIONING"
    rec = make_provider().create(s, offer())  # the re-run, in a new process
    assert len(gce.instances) == 1 and rec.state == "RUNNING" and rec.adopted is True
    assert rids(gce) == [request_id(s, offer())] * 2  # GCE answered the replay with the original operation
    assert len(gce.operations) == 1


def test_rerun_after_stockout_is_a_fresh_attempt(gce, provider, spec, offer):
    s = spec()
    gce.inject("stockout_op", zone="us-central1-a")
    with pytest.raises(CapacityError):
        provider.create(s, offer())
    rec = provider.create(s, offer())  # the same requestId replays the failed operation: detected as stale
    first, replay, fresh = rids(gce)
    assert first == replay == request_id(s, offer()) and fresh != first
    assert rec.state == "RUNNING" and len(gce.instances) == 1


def test_up_down_up(gce, provider, spec, offer):
    s = spec()
    provider.create(s, offer())
    assert provider.delete(s.name) is True and not gce.instances
    rec = provider.create(s, offer())
    assert rec.state == "RUNNING" and len(gce.instances) == 1 and len(set(rids(gce))) == 2


# ---------------------------------------------------------------------------------------------- failures
@pytest.mark.parametrize("kind, cls, code, scope", [
    ("stockout_op", CapacityError, "ZONE_RESOURCE_POOL_EXHAUSTED", None),
    ("stockout_op_bare", CapacityError, "ZONE_RESOURCE_POOL_EXHAUSTED", None),  # G2: no httpError fields
    ("stockout_details", CapacityError, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", None),
    ("quota_op", QuotaError, "QUOTA_EXCEEDED:NVIDIA_T4_GPUS", "region"),
    ("quota_op_global", QuotaError, "QUOTA_EXCEEDED:GPUS_ALL_REGIONS", "cloud"),
    ("quota_403", QuotaError, "QUOTA_EXCEEDED:NVIDIA_T4_GPUS", "region"),
    ("invalid_400", InvalidRequestError, "invalid", None),
    ("permission_403", AuthError, "forbidden", None),
    ("auth_401", AuthError, "InvalidOperation", None),  # the SDK tries to refresh anonymous credentials on 401
])
def test_failures_are_classified_and_leave_nothing(gce, provider, spec, offer, kind, cls, code, scope):
    gce.inject(kind, metric="NVIDIA_T4_GPUS") if kind == "quota_403" else gce.inject(kind)
    with pytest.raises(cls) as e:
        provider.create(spec(), offer())
    assert type(e.value) is cls and e.value.code == code and not gce.instances
    if scope:
        assert e.value.scope == scope
    assert "POST http" not in str(e.value)


def test_429_and_503_are_retried_with_the_same_request_id(gce, provider, spec, offer):
    gce.inject("rate_429")
    gce.inject("unavailable_503", times=2)
    rec = provider.create(spec(), offer())
    assert rec.state == "RUNNING" and len(set(rids(gce))) == 1 and len(rids(gce)) == 4


def test_retries_are_bounded_with_backoff(gce, make_provider, spec, offer):
    slept = []
    provider = make_provider(retry_base_delay=1.0, sleep=slept.append)
    gce.inject("unavailable_503", times=None)
    with pytest.raises(RetryExhaustedError, match="HTTP 503 after 4 tries") as e:
        provider.create(spec(), offer())
    assert e.value.code == "503" and len(rids(gce)) == 4 and not gce.instances
    assert len(slept) == 3 and all(0.5 * 2 ** i <= d <= 2 ** i for i, d in enumerate(slept))  # exponential, jittered


def test_operation_that_never_finishes_is_cleaned_up(gce, make_provider, spec, offer, slow_insert):
    gce.inject("op_never_done")
    s = spec()
    with pytest.raises(RetryExhaustedError, match="did not finish within 30 s") as e:
        make_provider(op_timeout=30, clock=slow_insert).create(s, offer())
    assert e.value.code == "OPERATION_TIMEOUT" and e.value.cleanup == "verified"
    assert not gce.instances and len(gce.calls("instances.delete")) == 1  # deleted and awaited
    insert_op = next(k[2] for k, op in gce.operations.items() if op["operationType"] == "insert")
    waits = [r for r in gce.calls("zoneOperations.wait") if r.path.endswith("/" + insert_op + "/wait")]
    assert len(waits) == 3  # kept waiting until the deadline: polls at t=0, 10, 20; at t=30 the deadline has passed


def test_unreachable_endpoint_is_retried_then_exhausted(gce, spec, offer):
    import socket

    from provisioner.providers.gcp.provider import GcpProvider

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    provider = GcpProvider(endpoint=url, project="p", retry_base_delay=0, poll_interval=0, op_timeout=5)
    with pytest.raises(RetryExhaustedError, match="after 4 tries") as e:
        provider.create(spec(), offer())
    assert e.value.code == "ConnectionError" and "cleaning up" not in str(e.value)  # nothing was sent: nothing to clean


def test_anonymous_credentials_refused(gce, provider, spec, offer):
    gce.require_auth = True
    with pytest.raises(AuthError):
        provider.create(spec(), offer())
    with pytest.raises(AuthError):
        provider.list()


def test_google_auth_error_is_auth_error(gce, make_provider, spec, offer):
    import google.oauth2.credentials

    expired = google.oauth2.credentials.Credentials(token=None)  # cannot refresh: RefreshError on first call
    with pytest.raises(AuthError, match="credentials"):
        make_provider(credentials=expired).create(spec(), offer())


def test_missing_credentials_or_project_is_cloud_error(monkeypatch):
    import google.auth
    import google.auth.exceptions

    from provisioner.errors import CloudError
    from provisioner.providers.gcp.provider import GcpProvider

    monkeypatch.delenv("TRAINVM_GCE_ENDPOINT", raising=False)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)

    def no_creds(**_):
        raise google.auth.exceptions.DefaultCredentialsError("Your default credentials were not found.")

    monkeypatch.setattr(google.auth, "default", no_creds)
    with pytest.raises(CloudError, match="no Google Cloud credentials") as e:
        GcpProvider()  # raised when the provider is built: the CLI skips that cloud
    assert e.value.exit_code == 3 and "gcloud auth application-default login" in e.value.hint
    monkeypatch.setattr(google.auth, "default", lambda **_: (object(), None))
    with pytest.raises(CloudError, match="no Google Cloud project") as e:
        GcpProvider()
    assert "GOOGLE_CLOUD_PROJECT" in e.value.hint


def test_endpoint_from_environment(gce, monkeypatch, spec, offer):
    from provisioner.hooks.providers import get_provider

    monkeypatch.setenv("TRAINVM_GCE_ENDPOINT", gce.url)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    monkeypatch.setenv("TRAINVM_RETRY_BASE_DELAY", "0")
    provider = get_provider("gcp")
    assert provider.gce.retry_base_delay == 0 and provider.project == "env-proj"
    provider.create(spec(), offer())
    assert gce.find(spec().name)[0] == "env-proj"


# ---------------------------------------------------------------------------------------------- find / list / down
def test_find_searches_every_zone(gce, provider, spec, offer):
    s = spec()
    provider.create(s, offer("us-east1-c"))
    rec = provider.find(s.name)
    assert rec.zone == "us-east1-c" and rec.region == "us-east1" and rec.image == PINNED
    assert provider.find("trainvm-nope-00000000") is None
    assert gce.calls("aggregatedList")[0].query["filter"] == f'name = "{s.name}"'


def test_list_only_trainvm_vms(gce, provider, spec, offer):
    provider.create(spec(), offer("us-central1-a"))
    provider.create(spec(profile_hash="cd" * 32), offer("europe-west4-a", "a2-highgpu-1g"))
    provider.create(spec(profile_hash="ef" * 32, spot=True), offer("us-east1-c"))
    clients = gce.sdk_clients()  # a VM that is not trainvm's
    from google.cloud import compute_v1

    other = compute_v1.Instance.from_json(json.dumps({
        "name": "someone-else", "machineType": "zones/us-central1-a/machineTypes/e2-standard-4", "labels": {"team": "x"},
        "disks": [{"boot": True, "autoDelete": True, "initializeParams": {"sourceImage": PINNED}}],
        "networkInterfaces": [{"network": "global/networks/default"}]}))
    clients.instances.insert(project="test-proj", zone="us-central1-a", instance_resource=other)
    vms = provider.list()
    assert sorted(v.name for v in vms) == sorted([spec().name, spec(profile_hash="cd" * 32).name,
                                                  spec(profile_hash="ef" * 32).name])
    by_zone = {v.zone: v for v in vms}
    assert by_zone["europe-west4-a"].instance_type == "a2-highgpu-1g" and by_zone["us-east1-c"].spot is True
    assert all(v.state == "RUNNING" and v.profile == "bert-finetune" and v.hash and v.created and v.price_hourly is None
               for v in vms)
    assert gce.calls("aggregatedList")[-1].query["filter"] == "labels.trainvm-managed = true"


def test_down_twice(gce, provider, spec, offer):
    s = spec()
    provider.create(s, offer("us-west1-b"))
    assert provider.delete(s.name) is True and gce.instance(s.name) is None
    assert provider.delete(s.name) is False


def test_down_no_wait_and_unmanaged(gce, provider, spec, offer):
    s = spec()
    provider.create(s, offer())
    assert provider.delete(s.name, wait=False) is True
    assert gce.instance(s.name)["status"] == "STOPPING" and not gce.calls("zoneOperations.wait")[1:]
    gce.instances[gce.find(s.name)]["labels"] = {}
    with pytest.raises(ConflictError, match="not managed"):
        provider.delete(s.name)


# ---------------------------------------------------------------------------------------------- reports
def b64(doc: dict) -> str:
    return base64.b64encode(json.dumps(doc).encode()).decode()


def test_read_report_from_serial_console(gce, provider, spec, offer):
    s = spec()
    provider.create(s, offer())
    assert provider.read_report(s.name) == (None, json.loads(s.profile_json))
    console = ("noise\nstartup-script: TRAINVM_STATUS=installing\n"
               f"Nov 22 10:00:00 vm google_metadata_script_runner[812]: startup-script: TRAINVM_REPORT={b64({'status': 'running:x'})}\n"
               "TRAINVM_REPORT=not-base64!!\n"
               f"startup-script: TRAINVM_REPORT={b64({'status': 'ready', 'driver': '550.127.05'})}\n"
               "TRAINVM_REPORT=e30K-garbled\nFinished running startup scripts.\n")
    gce.set_serial(s.name, console)
    report, profile = provider.read_report(s.name)
    assert (report.status, report.driver) == ("ready", "550.127.05") and profile["name"] == "bert-finetune"
    assert all(r.query.get("port") in (None, "1") for r in gce.calls("getSerialPortOutput"))


def test_read_report_prefers_guest_attribute(gce, provider, spec, offer):
    s = spec()
    provider.create(s, offer())
    gce.set_serial(s.name, f"TRAINVM_REPORT={b64({'status': 'running:driver'})}\n")
    gce.set_guest_attributes(s.name, {"report": b64({"status": "ready"})})
    assert provider.read_report(s.name)[0].status == "ready"
    gce.set_guest_attributes(s.name, {"report": json.dumps({"status": "ready", "python": "3.11.9"})})
    assert provider.read_report(s.name)[0].python == "3.11.9"
    assert not gce.calls("getSerialPortOutput")


def test_read_report_unknown_vm(gce, provider):
    assert provider.read_report("trainvm-nope-00000000") == (None, None)


# ---------------------------------------------------------------------------------------------- lifecycle
@pytest.mark.parametrize("spot", [False, True])
@pytest.mark.parametrize("on_max_run, action", [("stop", "STOP"), ("delete", "DELETE")])
def test_termination_action_follows_on_max_run(gce, provider, spec, offer, spot, on_max_run, action):
    """issue 10: maxRunDuration used to DELETE every VM (and its boot disk), on-demand ones included.
    What the emulator recorded on the wire follows lifecycle.on_max_run; spot preemption shares the field."""
    provider.create(spec(spot=spot, on_max_run=on_max_run, max_run_hours=2), offer())
    sched = gce.calls("instances.insert")[0].body["scheduling"]
    assert sched["instanceTerminationAction"] == action and sched["maxRunDuration"] == {"seconds": "7200"}
    assert gce.instance(spec().name)["scheduling"]["instanceTerminationAction"] == action
