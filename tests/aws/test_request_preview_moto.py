"""AWS is not provisionable yet, but `trainvm render --cloud aws` prints the RunInstances request
trainvm would send. Prove that body is a valid EC2 request: boto3 sends it to moto's server
(loopback), and the instance comes back with the type, tags, user data and disk asked for."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@pytest.fixture(scope="module")
def ec2():
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    client = boto3.client("ec2", region_name="us-east-1", endpoint_url=f"http://{host}:{port}",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    yield client
    server.stop()


@pytest.mark.parametrize("spot", [False, True])
def test_preview_is_a_valid_run_instances_request(ec2, monkeypatch, spot: bool) -> None:
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    from dataclasses import replace

    from provisioner.catalog.storage import load_catalog
    from provisioner.planner.core import plan
    from provisioner.planner.from_profile import Overrides, build_request
    from provisioner.profile import load_profile
    from provisioner.providers.aws_request import request_preview
    from provisioner.provision.launch import launch_spec

    loaded = load_profile(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
    request, _ = build_request(loaded, Overrides(("aws",), ("us-east-1",), spot))
    offer = plan(replace(request, include_unprovisionable=True, data_excluded_clouds={}), load_catalog(), __import__("datetime").date(2026, 11, 22)).chosen
    assert offer is not None and offer.cloud == "aws"
    spec = launch_spec(loaded, offer, spot=spot)
    body = request_preview(spec, offer)
    assert body["ImageId"].startswith("resolve:ssm:")
    body["ImageId"] = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]  # moto has no Canonical SSM parameters
    body.pop("Placement")  # AZ ids of the catalog (use1-az1) are not moto's
    body["UserData"] = base64.b64decode(body["UserData"])  # the preview shows the wire (base64); boto3 encodes itself
    reservation = ec2.run_instances(**body)
    inst = reservation["Instances"][0]
    assert inst["InstanceType"] == offer.instance_type
    tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
    assert tags["trainvm-managed"] == "true" and tags["Name"] == spec.name and tags["trainvm-hash"] == loaded.hash[:16]
    user_data = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="userData")["UserData"]["Value"]
    raw = spec.user_data if isinstance(spec.user_data, bytes) else spec.user_data.encode()
    assert base64.b64decode(user_data) == raw and len(raw) <= 16_384
    if spot:
        assert inst.get("InstanceLifecycle") == "spot" or body["InstanceMarketOptions"]["MarketType"] == "spot"


@pytest.mark.parametrize("on_idle, behavior", [("stop", "stop"), ("delete", "terminate")])
def test_shutdown_behavior_follows_on_idle(ec2, monkeypatch, on_idle: str, behavior: str) -> None:
    """issue 10: the request used to say `terminate` always, so an idle shutdown deleted the instance.
    InstanceInitiatedShutdownBehavior follows lifecycle.on_idle, as moto's server records it."""
    monkeypatch.setenv("TRAINVM_TODAY", "2026-11-22")
    import datetime
    from dataclasses import replace

    from provisioner.catalog.storage import load_catalog
    from provisioner.planner.core import plan
    from provisioner.planner.from_profile import Overrides, build_request
    from provisioner.profile import load_profile
    from provisioner.providers.aws_request import request_preview
    from provisioner.provision.launch import launch_spec

    loaded = load_profile(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")
    request, _ = build_request(loaded, Overrides(("aws",), ("us-east-1",), False))
    offer = plan(replace(request, include_unprovisionable=True, data_excluded_clouds={}), load_catalog(), datetime.date(2026, 11, 22)).chosen
    assert offer is not None
    spec = replace(launch_spec(loaded, offer), on_idle=on_idle)
    body = request_preview(spec, offer)
    assert body["InstanceInitiatedShutdownBehavior"] == behavior
    body["ImageId"] = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    body.pop("Placement")
    body["UserData"] = base64.b64decode(body["UserData"])
    inst = ec2.run_instances(**body)["Instances"][0]
    got = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"], Attribute="instanceInitiatedShutdownBehavior")
    assert got["InstanceInitiatedShutdownBehavior"]["Value"] == behavior
