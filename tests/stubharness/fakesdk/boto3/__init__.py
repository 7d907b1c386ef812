"""Fake boto3 (see _stubstore): client("s3", aws_access_key_id=..., ...) with list_objects_v2 paging and download_file;
client("ec2", region_name=R) with stop_instances / terminate_instances (trainvm-lifecycle's call through the s3 copy
tool's boto3), recorded as `ec2 ACTION INSTANCE` like the helper's call (pyfake/sitecustomize.py), answering EC2's
response shape; STUB_AWS_EC2_FAIL makes it fail as EC2 does without the permission (boto3 raises ClientError).
Not modelled: boto3's own retries and credential lookup (the real call runs against moto's server in
tests/aws/test_ec2_call.py)."""
import os

import _stubstore


class _Paginator:
    def paginate(self, Bucket, Prefix):
        _stubstore.record("s3", "list", Bucket, Prefix)
        yield {"Contents": [{"Key": k, "Size": s} for k, s in _stubstore.objects(Bucket, Prefix)]}


class _S3:
    def __init__(self, keys):
        self.keys = keys

    def get_paginator(self, name):
        assert name == "list_objects_v2"
        return _Paginator()

    def download_file(self, bucket, key, path):
        _stubstore.fetch(bucket, key, path)


class _EC2:
    def __init__(self, region):
        self.region = region

    def _call(self, action, ids, key, state):
        with open(os.path.join(_stubstore.STATE, "calls.log"), "a", encoding="utf-8") as fh:
            fh.write("ec2\t%s\t%s\n" % (action, ids[0]))
        if os.environ.get("STUB_AWS_EC2_FAIL") or self.region != "us-east-1":
            raise RuntimeError("An error occurred (UnauthorizedOperation) when calling the %s operation" % action)
        return {key: [{"InstanceId": ids[0], "CurrentState": {"Name": state}}]}

    def stop_instances(self, InstanceIds):
        return self._call("StopInstances", InstanceIds, "StoppingInstances", "stopping")

    def terminate_instances(self, InstanceIds):
        return self._call("TerminateInstances", InstanceIds, "TerminatingInstances", "shutting-down")


def client(service, **keys):
    _stubstore.record("s3", "client", service, "key=" + keys.get("aws_access_key_id", "instance-profile"))
    return _EC2(keys.get("region_name")) if service == "ec2" else _S3(keys)
