"""The GCE emulator driven by the real google-cloud-compute SDK (REST transport, anonymous credentials).

These tests pin down both the emulator's behaviour and what the SDK does with each answer, so the
trainvm GCE provider can be written against known SDK outcomes (see the fault tests).
"""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import google.auth.credentials
import google.auth.exceptions
import google.oauth2.credentials
import pytest

ROOT = Path(__file__).resolve().parents[2]

from google.api_core import exceptions as gexc  # noqa: E402
from google.api_core.future import polling  # noqa: E402
from google.cloud import compute_v1  # noqa: E402
from google.protobuf import json_format  # noqa: E402

from tests.emulators.gce import GceEmulator  # noqa: E402

P, Z, Z2 = "test-proj", "us-central1-a", "us-central1-b"
DONE = compute_v1.Operation.Status.DONE
FAST = polling.DEFAULT_POLLING.with_delay(initial=0.001, maximum=0.01).with_timeout(5)


@pytest.fixture(scope="module")
def sdk(server):
    clients = server.sdk_clients()
    # G1: ExtendedOperation.result() polls through a ZoneOperationsClient built without client_options;
    # point it at the emulator (test-only, private attribute).
    clients.instances._transport._extended_operations_services["zone_operations"] = clients.zone_operations
    return clients


def t4(name="t4-vm", zone=Z, **over) -> compute_v1.Instance:
    kw = dict(
        name=name,
        machine_type=f"zones/{zone}/machineTypes/n1-standard-8",
        guest_accelerators=[compute_v1.AcceleratorConfig(
            accelerator_type=f"zones/{zone}/acceleratorTypes/nvidia-tesla-t4", accelerator_count=1)],
        scheduling=compute_v1.Scheduling(on_host_maintenance="TERMINATE", automatic_restart=True),
        disks=[compute_v1.AttachedDisk(boot=True, auto_delete=True, type_="PERSISTENT",
                                       initialize_params=compute_v1.AttachedDiskInitializeParams(
                                           source_image="projects/ubuntu-os-cloud/global/images/ubuntu-2204-jammy-v20261015",
                                           disk_type=f"zones/{zone}/diskTypes/pd-ssd", disk_size_gb=200))],
        network_interfaces=[compute_v1.NetworkInterface(network="global/networks/default", access_configs=[
            compute_v1.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")])],
        metadata=compute_v1.Metadata(items=[compute_v1.Items(key="startup-script", value="#!/bin/bash\necho hi\n"),
                                            compute_v1.Items(key="enable-guest-attributes", value="TRUE")]),
        labels={"trainvm-managed": "true", "trainvm-profile": "bert", "trainvm-hash": "0123456789abcdef"},
    )
    kw.update(over)
    return compute_v1.Instance(**kw)


def insert(sdk, inst=None, zone=Z, request_id=None):
    return sdk.instances.insert(request=compute_v1.InsertInstanceRequest(
        project=P, zone=zone, request_id=request_id or str(uuid.uuid4()), instance_resource=inst or t4(zone=zone)))


def wait(sdk, op, zone=Z):
    return sdk.zone_operations.wait(project=P, zone=zone, operation=op.name)


def post_raw(emu, body, zone=Z):
    """POST an insert body as raw JSON (the SDK cannot send unknown fields); returns (status, json)."""
    req = urllib.request.Request(f"{emu.url}/compute/v1/projects/{P}/zones/{zone}/instances",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def t4_json(**over) -> dict:
    body = json_format.MessageToDict(compute_v1.Instance.pb(t4()))  # what the SDK puts on the wire
    body.update(over)
    return body


# ---------------------------------------------------------------------------------------------- basics
def test_insert_wait_get_running_with_nat_ip(emu, sdk):
    op = insert(sdk)
    assert op.status == compute_v1.Operation.Status.RUNNING and op.name.startswith("operation-")
    assert emu.instance("t4-vm")["status"] == "PROVISIONING"
    done = wait(sdk, op)
    assert done.status == DONE and not done.error.errors and done.operation_type == "insert"
    inst = sdk.instances.get(project=P, zone=Z, instance="t4-vm")
    assert inst.status == "RUNNING"
    assert inst.zone.endswith(f"/projects/{P}/zones/{Z}")
    assert inst.machine_type == f"https://www.googleapis.com/compute/v1/projects/{P}/zones/{Z}/machineTypes/n1-standard-8"
    assert inst.network_interfaces[0].access_configs[0].nat_i_p.startswith("198.51.100.")
    assert inst.labels["trainvm-managed"] == "true" and inst.scheduling.on_host_maintenance == "TERMINATE"
    assert inst.disks[0].boot and inst.disks[0].disk_size_gb == 200 and inst.creation_timestamp
    assert {i.key for i in inst.metadata.items} == {"startup-script", "enable-guest-attributes"}
    insert_req = emu.calls("instances.insert")[0]
    assert insert_req.body["disks"][0]["initializeParams"]["diskSizeGb"] == "200"  # int64 travels as a string
    assert [r.method_id for r in emu.requests] == [
        "compute.instances.insert", "compute.zoneOperations.wait", "compute.instances.get"]


def test_op_result_polls_get_until_done(emu, sdk):
    emu.polls_to_done = 3
    op = insert(sdk)
    assert op.result(timeout=5, polling=FAST) is None
    assert len(emu.calls("zoneOperations.get")) == 3
    assert emu.instance("t4-vm")["status"] == "RUNNING"


def test_list_and_aggregated_list_with_label_filters(emu, sdk):
    for name, zone, labels in [("a1", Z, {"trainvm-managed": "true", "trainvm-profile": "bert"}),
                               ("a2", Z2, {"trainvm-managed": "true", "trainvm-profile": "gpt"}),
                               ("other", Z, {"team": "x"})]:
        wait(sdk, insert(sdk, t4(name, zone=zone, labels=labels), zone=zone), zone=zone)

    def names(flt, **kw):
        req = compute_v1.AggregatedListInstancesRequest(project=P, filter=flt, **kw)
        return sorted(i.name for _, scoped in sdk.instances.aggregated_list(request=req) for i in scoped.instances)

    assert names("labels.trainvm-managed = true") == ["a1", "a2"]
    assert names('labels.trainvm-managed="true"') == ["a1", "a2"]
    assert names("labels.trainvm-managed:*") == ["a1", "a2"]
    assert names("(labels.trainvm-managed = true) (labels.trainvm-profile = gpt)") == ["a2"]
    assert names("labels.trainvm-managed = true AND labels.trainvm-profile != gpt") == ["a1"]
    assert names("labels.trainvm-profile eq 'b.*'".replace("'", "")) == ["a1"]
    assert names("name = a*") == ["a1", "a2"]
    assert names("labels.trainvm-managed = true", max_results=1) == ["a1", "a2"]  # the pager follows nextPageToken
    assert len(emu.calls("aggregatedList")) == 8 + 1
    scopes = dict(sdk.instances.aggregated_list(request=compute_v1.AggregatedListInstancesRequest(
        project=P, filter="labels.trainvm-profile = gpt")))
    assert scopes[f"zones/{Z}"].warning.code == "NO_RESULTS_ON_PAGE" and not scopes[f"zones/{Z}"].instances
    assert [i.name for i in sdk.instances.list(request=compute_v1.ListInstancesRequest(
        project=P, zone=Z, filter="labels.team = x"))] == ["other"]
    with pytest.raises(gexc.BadRequest, match="filter"):
        names("labels.trainvm-managed = (")


def test_aggregated_list_unreachable_zone_fails_the_whole_call(emu, sdk):
    """compute v1 (discovery revision 20261106) and google-cloud-compute 1.57 have no returnPartialSuccess on
    instances.aggregatedList: the parameter is refused like any unknown one, and one unreachable zone fails the
    whole call. Zone by zone, only the unreachable zone fails."""
    wait(sdk, insert(sdk))
    assert not emu.partial_success and "return_partial_success" not in compute_v1.AggregatedListInstancesRequest.meta.fields
    emu.inject("unreachable", zone=Z2, method="*", times=None)
    url = f"{emu.url}/compute/v1/projects/{P}/aggregated/instances"
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url + "?returnPartialSuccess=true", timeout=5)
    assert err.value.code == 400 and "returnPartialSuccess" in err.value.read().decode()
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url, timeout=5)
    assert err.value.code == 503 and f"zones/{Z2}" in err.value.read().decode()
    assert {Z, Z2} <= {z.name for z in sdk.zones.list(project=P)}
    assert [i.name for i in sdk.instances.list(project=P, zone=Z, retry=None)] == ["t4-vm"]
    with pytest.raises(Exception, match="unreachable"):
        list(sdk.instances.list(project=P, zone=Z2, retry=None))


def test_delete_twice_second_is_not_found(emu, sdk):
    wait(sdk, insert(sdk))
    op = sdk.instances.delete(project=P, zone=Z, instance="t4-vm")
    assert emu.instance("t4-vm")["status"] == "STOPPING"
    assert wait(sdk, op).status == DONE and op.operation_type == "delete"
    assert emu.instance("t4-vm") is None
    with pytest.raises(gexc.NotFound) as e:
        sdk.instances.delete(project=P, zone=Z, instance="t4-vm")
    assert e.value.code == 404 and e.value.errors[0]["reason"] == "notFound"
    with pytest.raises(gexc.NotFound):
        sdk.instances.get(project=P, zone=Z, instance="t4-vm")


def test_request_id_idempotency_and_conflict(emu, sdk):
    rid = str(uuid.uuid4())
    op1 = insert(sdk, request_id=rid)
    op2 = insert(sdk, request_id=rid)
    assert op1.name == op2.name and len(emu.instances) == 1
    wait(sdk, op1)
    assert insert(sdk, request_id=rid).name == op1.name  # even after DONE: same operation, no 409
    with pytest.raises(gexc.Conflict) as e:
        insert(sdk)  # new requestId, same name
    assert e.value.errors[0]["reason"] == "alreadyExists"
    with pytest.raises(gexc.BadRequest, match="requestId"):
        insert(sdk, request_id="not-a-uuid")


# ---------------------------------------------------------------------------------------------- faults
@pytest.mark.parametrize("kind, code, http", [
    ("stockout_op", "ZONE_RESOURCE_POOL_EXHAUSTED", 503),
    ("stockout_details", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", 503),
    ("quota_op", "QUOTA_EXCEEDED", 403),
    ("quota_op_global", "QUOTA_EXCEEDED", 403),
])
def test_failed_operation_wait_and_result(emu, sdk, kind, code, http):
    emu.inject(kind, zone=Z)
    op = insert(sdk)
    assert op.status == compute_v1.Operation.Status.RUNNING  # the insert call itself succeeds
    done = wait(sdk, op)
    assert done.status == DONE and done.error.errors[0].code == code and done.http_error_status_code == http
    assert emu.instance("t4-vm") is None and not emu.instances  # nothing half-created
    # ExtendedOperation.result() raises because both httpError fields are set
    emu.inject(kind, zone=Z)
    op = insert(sdk)
    with pytest.raises(gexc.GoogleAPICallError) as e:
        op.result(timeout=5, polling=FAST)
    assert e.value.code == http and e.value.errors[0].code == code  # errors[] are compute_v1.Errors protos (G3)
    if kind == "quota_op":
        assert e.value.errors[0].message == "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region us-central1."
        assert e.value.errors[0].error_details[0].quota_info.metric_name == "compute.googleapis.com/nvidia_t4_gpus"
        assert isinstance(e.value, gexc.Forbidden)
    if kind == "quota_op_global":
        assert "GPUS_ALL_REGIONS" in e.value.errors[0].message and "globally" in e.value.errors[0].message
    if kind.startswith("stockout"):
        assert isinstance(e.value, gexc.ServiceUnavailable) and e.value.message == "SERVICE UNAVAILABLE"


def test_stockout_bare_is_silent_success_in_result(emu, sdk):
    emu.inject("stockout_op_bare", times=2)
    op = insert(sdk)
    assert op.result(timeout=5, polling=FAST) is None  # G2: no exception at all
    assert op.error.errors[0].code == "ZONE_RESOURCE_POOL_EXHAUSTED" and not op.http_error_status_code
    done = wait(sdk, insert(sdk))
    assert done.status == DONE and done.error.errors[0].code == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert "httpErrorStatusCode" not in emu.operations[(P, Z, done.name)] and not emu.instances


def test_fault_scoped_to_zone_and_times(emu, sdk):
    emu.inject("stockout_op", zone=Z, times=2)
    assert wait(sdk, insert(sdk, t4("b1", zone=Z2), zone=Z2), zone=Z2).error.errors == []  # other zone unaffected
    assert wait(sdk, insert(sdk, t4("b2"))).error.errors[0].code == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert wait(sdk, insert(sdk, t4("b3"))).error.errors[0].code == "ZONE_RESOURCE_POOL_EXHAUSTED"
    assert not wait(sdk, insert(sdk, t4("b4"))).error.errors and not emu.faults
    assert sorted(k[2] for k in emu.instances) == ["b1", "b4"]


@pytest.mark.parametrize("kind, exc, code, reason", [
    ("quota_403", gexc.Forbidden, 403, "quotaExceeded"),
    ("rate_429", gexc.TooManyRequests, 429, "rateLimitExceeded"),
    ("unavailable_503", gexc.ServiceUnavailable, 503, "backendError"),
    ("invalid_400", gexc.BadRequest, 400, "invalid"),
    ("permission_403", gexc.Forbidden, 403, "forbidden"),
])
def test_http_faults_on_insert(emu, sdk, kind, exc, code, reason):
    emu.inject(kind, metric="NVIDIA_L4_GPUS") if kind == "quota_403" else emu.inject(kind)
    with pytest.raises(exc) as e:
        insert(sdk)
    assert e.value.code == code and e.value.errors[0]["reason"] == reason  # errors[] are dicts here (G3)
    assert e.value.reason is None
    if kind == "quota_403":
        assert "Quota 'NVIDIA_L4_GPUS' exceeded.  Limit: 0.0 in region us-central1." in e.value.message
    assert not emu.instances and len(emu.calls("insert")) == 1  # insert has no default retry
    wait(sdk, insert(sdk))  # one-shot fault: the next insert works
    assert emu.instance("t4-vm")["status"] == "RUNNING"


def test_http_fault_on_get_is_retried_by_sdk(emu, sdk):
    wait(sdk, insert(sdk))
    emu.inject("unavailable_503", method="instances.get", times=2)
    assert sdk.instances.get(project=P, zone=Z, instance="t4-vm").status == "RUNNING"
    assert len(emu.calls("instances.get")) == 3


def test_op_never_done(emu, sdk):
    emu.inject("op_never_done")
    op = insert(sdk)
    for _ in range(3):
        assert wait(sdk, op).status == compute_v1.Operation.Status.RUNNING
    with pytest.raises(TimeoutError):  # concurrent.futures.TimeoutError from ExtendedOperation.result()
        op.result(polling=polling.DEFAULT_POLLING.with_delay(initial=0.001, maximum=0.005).with_timeout(0.1))
    assert emu.instance("t4-vm")["status"] == "PROVISIONING"
    assert wait(sdk, sdk.instances.delete(project=P, zone=Z, instance="t4-vm")).status == DONE  # cleanup works
    assert not emu.instances


def test_unknown_operation_is_404(emu, sdk):
    with pytest.raises(gexc.NotFound):
        sdk.zone_operations.wait(project=P, zone=Z, operation="operation-1-2-3-4")


def test_inject_rejects_unknown_kind(emu):
    with pytest.raises(ValueError, match="unknown fault kind"):
        emu.inject("stockout")


# ---------------------------------------------------------------------------------------------- validation
def test_unknown_field_raw_json(emu):
    status, body = post_raw(emu, t4_json(guestAccelerator=[]))
    assert status == 400 and body["error"]["errors"][0]["reason"] == "invalid"
    assert 'Unknown name "guestAccelerator"' in body["error"]["message"]
    nested = t4_json()
    nested["scheduling"]["onHostMaintenence"] = "TERMINATE"
    status, body = post_raw(emu, nested)
    assert status == 400 and "onHostMaintenence\" at 'resource.scheduling'" in body["error"]["message"]
    assert not emu.instances


@pytest.mark.parametrize("mutate, needle", [
    (lambda b: b["disks"][0]["initializeParams"].update(diskSizeGb="200GB"), "diskSizeGb"),
    (lambda b: b["scheduling"].update(automaticRestart="yes"), "TYPE_BOOL"),
    (lambda b: b.update(labels=["x"]), "resource.labels"),
    (lambda b: b.update(name="Bad_Name"), "resource.name"),
    (lambda b: b.update(status="RUNNING"), "output only"),
    (lambda b: b.pop("name"), "Required field 'resource.name'"),
    (lambda b: b["metadata"]["items"].append({"key": "x"}), "resource.metadata.items[2].value"),
])
def test_schema_type_errors_raw_json(emu, mutate, needle):
    body = t4_json()
    mutate(body)
    status, out = post_raw(emu, body)
    assert status == 400 and needle in json.dumps(out["error"]["errors"]), out


def test_bad_enum_through_sdk(emu, sdk):
    with pytest.raises(gexc.BadRequest) as e:  # G4: the SDK sends any string
        insert(sdk, t4(scheduling=compute_v1.Scheduling(on_host_maintenance="STOP")))
    assert "resource.scheduling.onHostMaintenance" in e.value.message and "STOP" in e.value.message
    with pytest.raises(gexc.BadRequest, match="provisioningModel"):
        insert(sdk, t4(scheduling=compute_v1.Scheduling(on_host_maintenance="TERMINATE", provisioning_model="CHEAP")))
    with pytest.raises(gexc.BadRequest, match="instanceTerminationAction"):
        insert(sdk, t4(scheduling=compute_v1.Scheduling(on_host_maintenance="TERMINATE", provisioning_model="SPOT",
                                                        instance_termination_action="DESTROY")))
    assert not emu.instances


def spot_a2(**sched):
    return t4("a2-vm", machine_type=f"zones/{Z}/machineTypes/a2-highgpu-1g", guest_accelerators=[],
              scheduling=compute_v1.Scheduling(**sched))


@pytest.mark.parametrize("inst, needle", [
    (t4(machine_type="n1-standard-8"), "resource.machineType"),
    (t4(machine_type=f"zones/{Z2}/machineTypes/n1-standard-8"), "resource.machineType"),
    (t4(machine_type=f"zones/{Z}/machineTypes/x9-huge-1"), "does not exist"),
    (t4(machine_type=f"zones/{Z}/machineTypes/g2-standard-8"), "only N1"),
    (t4(scheduling=compute_v1.Scheduling(automatic_restart=True)), "live migration"),
    (spot_a2(on_host_maintenance="MIGRATE"), "live migration"),
    (spot_a2(on_host_maintenance="TERMINATE", provisioning_model="SPOT", automatic_restart=True), "automatically restarted"),
    (spot_a2(on_host_maintenance="TERMINATE", instance_termination_action="DELETE"), "instanceTerminationAction"),
    (t4(labels={"Owner": "alice"}), "Label key 'Owner'"),
    (t4(labels={"owner": "Alice.Smith"}), "Label value 'Alice.Smith'"),
    (t4(labels={"k" * 64: "v"}), "Label key"),
    (t4(metadata=compute_v1.Metadata(items=[compute_v1.Items(key="startup-script", value="x" * (256 * 1024 + 1))])),
     "exceeds 262144 bytes"),
    (t4(disks=[]), "No boot disk"),
    (t4(disks=[t4().disks[0], t4().disks[0]]), "Only one boot disk"),
    (t4(guest_accelerators=[compute_v1.AcceleratorConfig(
        accelerator_type=f"zones/{Z}/acceleratorTypes/nvidia-l4", accelerator_count=1)]), "nvidia-l4"),
    (t4(network_interfaces=[]), "network interface"),
])
def test_gce_rules_reject(emu, sdk, inst, needle):
    with pytest.raises(gexc.BadRequest) as e:
        insert(sdk, inst)
    assert needle in json.dumps([x["message"] for x in e.value.errors]), e.value.message
    assert not emu.instances


def test_max_run_duration_needs_termination_action(emu, sdk):
    with pytest.raises(gexc.BadRequest, match="instanceTerminationAction"):
        insert(sdk, t4(scheduling=compute_v1.Scheduling(on_host_maintenance="TERMINATE",
                                                        max_run_duration=compute_v1.Duration(seconds=3600))))
    ok = t4(scheduling=compute_v1.Scheduling(on_host_maintenance="TERMINATE", instance_termination_action="STOP",
                                             max_run_duration=compute_v1.Duration(seconds=3600)))
    assert wait(sdk, insert(sdk, ok)).error.errors == []


def test_valid_variants_accepted(emu, sdk):
    spot = spot_a2(on_host_maintenance="TERMINATE", provisioning_model="SPOT", instance_termination_action="DELETE",
                   automatic_restart=False, max_run_duration=compute_v1.Duration(seconds=86400))
    assert wait(sdk, insert(sdk, spot)).error.errors == []
    full = f"https://www.googleapis.com/compute/v1/projects/{P}/zones/{Z}/machineTypes/n1-standard-8"
    assert wait(sdk, insert(sdk, t4("full-url", machine_type=full))).error.errors == []
    cpu = t4("cpu-only", machine_type=f"projects/{P}/zones/{Z}/machineTypes/e2-standard-4", guest_accelerators=[],
             scheduling=compute_v1.Scheduling())
    assert wait(sdk, insert(sdk, cpu)).error.errors == []
    inst = emu.instance("a2-vm")
    assert inst["scheduling"]["provisioningModel"] == "SPOT" and inst["scheduling"]["maxRunDuration"] == {"seconds": "86400"}


def test_unknown_image_is_404(emu, sdk):
    bad = t4()
    bad.disks[0].initialize_params.source_image = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2604-lts"
    with pytest.raises(gexc.NotFound):
        insert(sdk, bad)
    bad.disks[0].initialize_params.source_image = "projects/debian-cloud/global/images/family/debian-12"
    assert wait(sdk, insert(sdk, bad)).status == DONE


# ---------------------------------------------------------------------------------------------- images / console / guest attrs
@pytest.mark.parametrize("project, family, name", [
    ("ubuntu-os-cloud", "ubuntu-2204-lts", "ubuntu-2204-jammy-v20261015"),
    ("ubuntu-os-cloud", "ubuntu-2404-lts-amd64", "ubuntu-2404-noble-amd64-v20261015"),
    ("debian-cloud", "debian-12", "debian-12-bookworm-v20261014"),
])
def test_images_get_from_family(emu, sdk, project, family, name):
    img = sdk.images.get_from_family(project=project, family=family)
    assert img.name == name and img.family == family and img.status == "READY"
    assert img.self_link == f"https://www.googleapis.com/compute/v1/projects/{project}/global/images/{name}"
    assert sdk.images.get(project=project, image=name).name == name


def test_images_unknown_family_404(emu, sdk):
    with pytest.raises(gexc.NotFound):
        sdk.images.get_from_family(project="ubuntu-os-cloud", family="ubuntu-1404-lts")


def serial(sdk, start=None, name="t4-vm"):
    req = compute_v1.GetSerialPortOutputInstanceRequest(project=P, zone=Z, instance=name, port=1)
    if start is not None:
        req.start = start
    return sdk.instances.get_serial_port_output(request=req)


def test_serial_port_output_incremental(emu, sdk):
    wait(sdk, insert(sdk))
    assert serial(sdk).contents == "" and serial(sdk).next_ == 0
    report = base64.b64encode(json.dumps({"gpu": {"name": "Tesla T4"}}).encode()).decode()
    emu.set_serial("t4-vm", "boot\nTRAINVM_STATUS=driver\n")
    out = serial(sdk, 0)
    assert out.contents == "boot\nTRAINVM_STATUS=driver\n" and out.start == 0 and out.next_ == len(out.contents)
    emu.append_serial("t4-vm", f"TRAINVM_REPORT={report}\n")
    more = serial(sdk, out.next_)
    assert more.contents == f"TRAINVM_REPORT={report}\n" and more.start == out.next_
    assert serial(sdk, -7).contents == report[-6:] + "\n"
    assert emu.calls("getSerialPortOutput")[-1].query == {"port": "1", "start": "-7"}
    with pytest.raises(gexc.NotFound):
        serial(sdk, name="missing")


def test_serial_buffer_discards_oldest(emu, sdk):
    emu.serial_buffer_bytes = 10
    try:
        wait(sdk, insert(sdk))
        emu.set_serial("t4-vm", "0123456789abcdef")
        out = serial(sdk, 2)
        assert out.start == 6 and out.contents == "6789abcdef" and out.next_ == 16
    finally:
        emu.serial_buffer_bytes = 1 << 20


def test_guest_attributes(emu, sdk):
    wait(sdk, insert(sdk))
    req = compute_v1.GetGuestAttributesInstanceRequest(project=P, zone=Z, instance="t4-vm", query_path="trainvm/")
    with pytest.raises(gexc.NotFound):  # nothing written yet
        sdk.instances.get_guest_attributes(request=req)
    emu.set_guest_attributes("t4-vm", {"status": "ready", "report": "eyJvayI6dHJ1ZX0="})
    emu.set_guest_attributes("t4-vm", {"other": "x"}, namespace="hostkeys")
    got = sdk.instances.get_guest_attributes(request=req)
    assert got.query_path == "trainvm/"
    assert {(i.namespace, i.key, i.value) for i in got.query_value.items} == {
        ("trainvm", "status", "ready"), ("trainvm", "report", "eyJvayI6dHJ1ZX0=")}
    one = sdk.instances.get_guest_attributes(request=compute_v1.GetGuestAttributesInstanceRequest(
        project=P, zone=Z, instance="t4-vm", variable_key="trainvm/status"))
    assert one.variable_value == "ready"


def test_guest_attributes_need_metadata_flag(emu, sdk):
    inst = t4(metadata=compute_v1.Metadata(items=[compute_v1.Items(key="startup-script", value="#!/bin/sh\n")]))
    wait(sdk, insert(sdk, inst))
    with pytest.raises(gexc.BadRequest, match="enable-guest-attributes"):
        sdk.instances.get_guest_attributes(request=compute_v1.GetGuestAttributesInstanceRequest(
            project=P, zone=Z, instance="t4-vm", query_path="trainvm/"))


# ---------------------------------------------------------------------------------------------- wire / lifecycle
def test_wire_strictness(emu):
    def get(path):
        try:
            with urllib.request.urlopen(f"{emu.url}{path}", timeout=5) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    status, body = get(f"/compute/v1/projects/{P}/zones/{Z}/instances?bogus=1")
    assert status == 400 and 'Unknown name "bogus"' in body["error"]["message"]
    status, body = get(f"/compute/v1/projects/{P}/zones/{Z}/instances?maxResults=abc")
    assert status == 400
    status, body = get(f"/compute/v1/projects/{P}/zones/Bad_Zone/instances")
    assert status == 400 and "zone" in body["error"]["message"]
    status, body = get("/compute/v1/projects/p/nothing/here")
    assert status == 404 and body["error"]["errors"][0]["reason"] == "notFound"
    status, body = get(f"/compute/v1/projects/{P}/zones/us-central1/instances")
    assert status == 400 and "Unknown zone" in body["error"]["message"]
    status, body = get(f"/compute/v1/projects/{P}/zones/{Z}/instances")
    assert status == 200 and body["kind"] == "compute#instanceList" and "items" not in body
    assert [(r.method, r.query, r.status) for r in emu.requests][:2] == [
        ("GET", {"bogus": "1"}, 400), ("GET", {"maxResults": "abc"}, 400)]
    req = urllib.request.Request(f"{emu.url}/compute/v1/projects/{P}/zones/{Z}/instances", data=b"{not json",
                                 method="POST", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 400 and "Invalid JSON payload" in json.load(e.value)["error"]["message"]
    assert emu.requests[-1].body is None and emu.requests[-1].raw == b"{not json"


class RefreshingToken(google.auth.credentials.Credentials):
    """Credentials that can refresh (like real user/service-account credentials), counting refreshes."""

    def __init__(self):
        super().__init__()
        self.token, self.refreshes = "tok-0", 0

    def refresh(self, request):
        self.refreshes += 1
        self.token = f"tok-{self.refreshes}"


def test_auth_401_depends_on_credentials(emu):
    # google-auth's AuthorizedSession answers a 401 by refreshing the credentials and retrying (at most twice).
    emu.inject("auth_401", times=None, method="*")
    with pytest.raises(google.auth.exceptions.InvalidOperation):  # AnonymousCredentials cannot refresh
        emu.sdk_clients().images.get_from_family(project="debian-cloud", family="debian-12")
    with pytest.raises(google.auth.exceptions.RefreshError):  # a bare token cannot refresh either
        emu.sdk_clients(credentials=google.oauth2.credentials.Credentials(token="fake")).images.get_from_family(
            project="debian-cloud", family="debian-12")
    creds = RefreshingToken()
    emu.requests.clear()
    with pytest.raises(gexc.Unauthorized) as e:  # refreshable credentials: 3 requests, then Unauthorized
        insert(emu.sdk_clients(credentials=creds))
    assert e.value.code == 401 and e.value.errors[0]["reason"] == "required"
    assert creds.refreshes == 2 and [r.headers["authorization"] for r in emu.requests] == [
        "Bearer tok-0", "Bearer tok-1", "Bearer tok-2"]
    emu.clear_faults()
    emu.inject("auth_401")  # one-shot: the refresh-and-retry succeeds
    assert emu.sdk_clients(credentials=RefreshingToken()).images.get_from_family(
        project="debian-cloud", family="debian-12").name.startswith("debian-12")


def test_require_auth_and_bearer_token():
    with GceEmulator(require_auth=True) as emu:
        with pytest.raises(google.auth.exceptions.InvalidOperation):  # 401 -> refresh of anonymous creds
            emu.sdk_clients().images.get_from_family(project="debian-cloud", family="debian-12")
        img = emu.sdk_clients(credentials=google.oauth2.credentials.Credentials(token="fake")).images.get_from_family(
            project="debian-cloud", family="debian-12")
        assert img.name.startswith("debian-12-bookworm-v") and emu.requests[-1].headers["authorization"] == "Bearer fake"


def test_pending_then_running_then_done(sdk):
    with GceEmulator(polls_to_done=3, initial_op_status="PENDING") as emu:
        c = emu.sdk_clients()
        op = insert(c)
        S = compute_v1.Operation.Status
        seen = [op.status] + [c.zone_operations.get(project=P, zone=Z, operation=op.name).status for _ in range(3)]
        assert seen == [S.PENDING, S.RUNNING, S.RUNNING, S.DONE]
        assert emu.instance("t4-vm")["status"] == "RUNNING"


def test_polls_to_done_zero_returns_done_insert(emu, sdk):
    emu.polls_to_done = 0
    op = insert(sdk)
    assert op.status == DONE and emu.instance("t4-vm")["status"] == "RUNNING"


def test_reset_and_set_status(emu, sdk):
    wait(sdk, insert(sdk))
    emu.set_status("t4-vm", "TERMINATED")  # e.g. a preempted Spot VM
    assert sdk.instances.get(project=P, zone=Z, instance="t4-vm").status == "TERMINATED"
    emu.inject("rate_429", times=None)
    emu.reset()
    assert not emu.instances and not emu.faults and not emu.requests
