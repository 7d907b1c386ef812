"""Stop and start on AWS, on the API client and the instance lookups: ``StopInstances`` (compute billing ends; EBS
stays; instance store is lost) / ``StartInstances`` (the user data runs again only through the startup unit it
installed, which re-verifies the stack), on every instance of the name at once (a cluster's private IPs stay), then
the waiter when asked to wait."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from provisioner.providers.base import InstanceRecord

if TYPE_CHECKING:
    from provisioner.providers.aws.api import AwsApi
    from provisioner.providers.aws.instances import AwsInstances


class AwsPower:
    def __init__(self, api: AwsApi, instances: AwsInstances) -> None:
        self.api, self.instances = api, instances

    def stop(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self._power(name, "stop", wait)

    def start(self, name: str, *, wait: bool = True) -> InstanceRecord | None:
        return self._power(name, "start", wait)

    def _power(self, name: str, action: Literal["stop", "start"], wait: bool) -> InstanceRecord | None:
        inst = self.instances.managed(name)
        if inst is None:
            return None
        region, ec2 = inst["_region"], self.api.ec2(inst["_region"])
        ids = [i["InstanceId"] for i in self.instances.live(region, name)]  # every node at once (private IPs stay)
        if action == "stop":
            self.api.call(lambda: ec2.stop_instances(InstanceIds=ids))
        else:
            self.api.call(lambda: ec2.start_instances(InstanceIds=ids))
        if wait:
            self.api.wait(region, "instance_stopped" if action == "stop" else "instance_running", ids)
        return self.instances.record(self.instances.get(region, inst["InstanceId"]) or inst)
