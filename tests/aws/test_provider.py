"""AwsProvider through boto3 against moto's server (loopback), the requests unmodified: what moto stored is
read back through the API, never from the request trainvm built."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import pytest

from provisioner.providers.aws import request as R
from provisioner.providers.base import ConflictError
from tests.aws.conftest import t4_offers, t4_spec
from tests.helpers import REPO

REPORT = json.loads((REPO / "tests" / "fixtures" / "probe" / "report-vm-t4.json").read_text())


@pytest.fixture
def provider(aws):
    from provisioner.providers.aws.provider import AwsProvider

    return AwsProvider()


@pytest.fixture(scope="module")
def offer():
    return t4_offers()[0]


def volumes(aws, instance_id):
    ec2 = aws.client("ec2", direct=True)
    return ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}])["Volumes"]


@pytest.mark.parametrize("disk_type", ["standard", "balanced", "ssd"])
def test_create_sends_the_builders_request_and_moto_stores_it(aws, provider, offer, disk_type) -> None:
    spec = t4_spec(offer, boot_disk_type=disk_type)
    rec = provider.create(spec, offer)
    run = aws.faults.calls("RunInstances")
    assert len(run) == 1 and len(run[0].params["ClientToken"]) <= 64
    assert run[0].params["Placement.AvailabilityZone"] == rec.zone
    # the catalog's AZ ID maps to this account's AZ name (moto: us-east-1b is use1-az1)
    zones = aws.client("ec2").describe_availability_zones()["AvailabilityZones"]
    assert {z["ZoneName"]: z["ZoneId"] for z in zones}[rec.zone] == offer.zone
    inst = aws.instances()[0]
    assert inst["InstanceType"] == offer.instance_type and inst["State"]["Name"] == "running"
    assert inst["ImageId"] == aws.amis[("us-east-1", spec.os)] == rec.image  # pinned from the SSM parameter
    assert inst["MetadataOptions"]["HttpTokens"] == "required"
    assert inst["RootDeviceName"] == "/dev/sda1"
    [vol] = volumes(aws, inst["InstanceId"])
    assert vol["VolumeType"] == "gp3" and vol["Size"] == spec.boot_disk_gib
    assert vol["Attachments"][0]["Device"] == "/dev/sda1"
    assert {t["Key"]: t["Value"] for t in vol.get("Tags") or []}["trainvm-hash"] == spec.labels["trainvm-hash"]
    ebs = {k.rsplit(".", 1)[-1]: v for k, v in run[0].params.items() if k.startswith("BlockDeviceMapping.1.Ebs.")}
    assert ebs["VolumeType"] == "gp3" and run[0].params["BlockDeviceMapping.1.DeviceName"] == "/dev/sda1"
    if disk_type == "ssd":  # moto stores gp3 volumes at the baseline whatever is asked: the wire shows what was
        assert (ebs["Iops"], ebs["Throughput"]) == ("16000", "1000")
    else:
        assert "Iops" not in ebs and "Throughput" not in ebs
    ec2 = aws.client("ec2", direct=True)
    data = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")["UserData"]["Value"]
    raw = spec.user_data if isinstance(spec.user_data, bytes) else spec.user_data.encode()
    assert base64.b64decode(data) == raw
    got = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="instanceInitiatedShutdownBehavior")
    assert got["InstanceInitiatedShutdownBehavior"]["Value"] == R.shutdown_behavior(spec)
    assert rec.state == "RUNNING" and rec.spot is False and rec.region == "us-east-1"


def test_debian_root_device_comes_from_its_ami(aws, provider, tmp_path) -> None:
    debian = tmp_path / "debian.yaml"
    debian.write_text(f"extends: {REPO / 'profiles' / 'examples' / 'bert-finetune-t4.yaml'}\nstack: {{os: debian-12}}\n")
    offer = t4_offers(path=debian)[0]
    provider.create(t4_spec(offer, path=debian), offer)
    inst = aws.instances()[0]
    assert inst["RootDeviceName"] == "/dev/xvda"
    assert [m["DeviceName"] for m in inst["BlockDeviceMappings"]] == ["/dev/xvda"]


def test_spot_request_is_a_spot_instance_in_moto(aws, provider) -> None:
    offer = t4_offers(spot=True)[0]
    rec = provider.create(t4_spec(offer, spot=True), offer)
    assert aws.instances()[0].get("InstanceLifecycle") == "spot" and rec.spot is True


def test_security_group_ssh_only_from_ssh_from(aws, provider, offer) -> None:
    provider.create(t4_spec(offer, ssh_from="203.0.113.7/32"), offer)
    [sg] = aws.security_groups()
    assert [(p["FromPort"], [r["CidrIp"] for r in p["IpRanges"]]) for p in sg["IpPermissions"]] == [(22, ["203.0.113.7/32"])]
    assert aws.instances()[0]["SecurityGroups"][0]["GroupId"] == sg["GroupId"]


def test_no_ssh_from_no_inbound_rule(aws, provider, offer) -> None:
    rec = provider.create(t4_spec(offer, ssh_from=None), offer)
    [sg] = aws.security_groups()
    assert sg["IpPermissions"] == [] and "no inbound traffic" in rec.notes[0]


def test_a_mixed_lifecycle_gets_an_instance_profile_that_may_only_terminate_itself(aws, provider, offer) -> None:
    """Both timers stop (the example): a guest shutdown set to stop does it, no instance profile. on_idle delete +
    on_max_run stop: the delete is the helper's EC2 TerminateInstances, which the role allows (IAM's PutRolePolicy
    in moto validates the document; moto evaluates no policy)."""
    uniform = t4_spec(offer)
    assert (uniform.on_idle, uniform.on_max_run, bool(uniform.idle_shutdown_minutes), bool(uniform.max_run_hours)) == \
        ("stop", "stop", True, True)
    provider.create(uniform, offer)
    assert aws.instance_profiles() == [] and "IamInstanceProfile.Name" not in aws.faults.calls("RunInstances")[0].params
    provider.delete(uniform.name)
    mixed = replace(uniform, on_idle="delete")
    provider.create(mixed, offer)
    assert aws.instance_profiles() == [mixed.name]
    doc = aws.client("iam", direct=True).get_role_policy(RoleName=mixed.name, PolicyName="trainvm")["PolicyDocument"]
    [st] = (json.loads(doc) if isinstance(doc, str) else doc)["Statement"]
    assert st["Action"] == ["ec2:TerminateInstances"] and st["Condition"]["ArnLike"] == {
        "ec2:InstanceProfile": f"arn:aws:iam::*:instance-profile/{mixed.name}"}
    assert provider.delete(mixed.name) is True and aws.instance_profiles() == []


def test_instance_profile_only_when_the_vm_calls_aws(aws, provider, offer) -> None:
    quiet = t4_spec(offer, idle_shutdown_minutes=None, max_run_hours=None)
    provider.create(quiet, offer)
    assert aws.instance_profiles() == [] and "IamInstanceProfile.Name" not in aws.faults.calls("RunInstances")[0].params
    provider.delete(quiet.name)
    s3 = t4_spec(offer, data_sources=("s3://corpus/glue/",))
    provider.create(s3, offer)
    assert aws.instance_profiles() == [s3.name]
    iam = aws.client("iam", direct=True)
    doc = iam.get_role_policy(RoleName=s3.name, PolicyName="trainvm")["PolicyDocument"]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    assert doc == R.role_policy(s3, "us-east-1")
    assert aws.faults.calls("RunInstances")[-1].params["IamInstanceProfile.Name"] == s3.name
    assert provider.delete(s3.name) is True
    assert aws.instance_profiles() == [] and s3.name not in aws.roles() and aws.security_groups() == []


def test_create_again_adopts_the_same_hash(aws, provider, offer) -> None:
    spec = t4_spec(offer)
    first = provider.create(spec, offer)
    again = provider.create(spec, offer)
    assert again.adopted is True and again.cloud_id == first.cloud_id
    assert len(aws.faults.calls("RunInstances")) == 1 and len(aws.instances()) == 1


def test_another_hash_or_an_unmanaged_instance_is_a_conflict(aws, provider, offer) -> None:
    spec = t4_spec(offer)
    provider.create(spec, offer)
    other = replace(spec, profile_hash="0" * 64, labels=dict(spec.labels, **{"trainvm-hash": "0" * 16}))
    with pytest.raises(ConflictError, match="another version"):
        provider.create(other, offer)
    ec2 = aws.client("ec2", direct=True)
    image = aws.amis[("us-east-1", "ubuntu-22.04")]
    ec2.run_instances(ImageId=image, InstanceType="t3.micro", MinCount=1, MaxCount=1,
                      TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": "theirs"}]}])
    with pytest.raises(ConflictError, match="not managed by trainvm"):
        provider.create(replace(spec, name="theirs"), offer)
    with pytest.raises(ConflictError):
        provider.delete("theirs")
    assert [r.name for r in provider.list()] == [spec.name]  # only trainvm's
    assert provider.find("theirs") is None


def test_list_find_stop_start_delete_twice(aws, provider, offer) -> None:
    spec = t4_spec(offer)
    provider.create(spec, offer)
    found = provider.find(spec.name)
    assert found is not None and found.hash == spec.labels["trainvm-hash"] and found.price_hourly == spec.price_hourly
    assert provider.stop(spec.name).state == "STOPPED"
    assert aws.instances()[0]["State"]["Name"] == "stopped"
    assert provider.start(spec.name).state == "RUNNING"
    assert provider.stop("nope") is None and provider.start("nope") is None
    assert provider.delete(spec.name) is True
    assert aws.instances() == [] and aws.security_groups() == [] and aws.instance_profiles() == []
    assert aws.client("ec2", direct=True).describe_key_pairs()["KeyPairs"] == []
    assert provider.delete(spec.name) is False
    assert provider.find(spec.name) is None and provider.list() == []


def test_ssh_key_is_imported_and_deleted(aws, provider, offer, tmp_path, monkeypatch) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = tmp_path / "id.pub"
    public = Ed25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                                    serialization.PublicFormat.OpenSSH)
    key.write_text(public.decode() + " t@e\n")
    monkeypatch.setenv("TRAINVM_SSH_PUBLIC_KEY", str(key))
    spec = t4_spec(offer)
    provider.create(spec, offer)
    assert aws.instances()[0]["KeyName"] == spec.name
    provider.delete(spec.name)
    assert aws.client("ec2", direct=True).describe_key_pairs()["KeyPairs"] == []


def test_report_and_profile_read_back_through_the_console(aws, provider, offer) -> None:
    spec = t4_spec(offer)
    rec = provider.create(spec, offer)
    report, profile = provider.read_report(spec.name)
    assert report is None and profile == json.loads(spec.profile_json)  # moto's console has no report yet
    line = "TRAINVM_REPORT=" + base64.b64encode(json.dumps(REPORT).encode()).decode()
    aws.faults.set_console(rec.cloud_id, f"boot...\nTRAINVM_STATUS=ready\n{line}\n")
    report, _ = provider.read_report(spec.name)
    assert report is not None and report.driver == REPORT["driver"]
    text, end = provider.console(spec.name)
    assert "TRAINVM_STATUS=ready" in text and provider.console(spec.name, end) == ("", end)
    assert aws.faults.calls("GetConsoleOutput")[-1].params["Latest"] == "true"
    assert provider.read_report("nope") == (None, None) and provider.console("nope") is None
