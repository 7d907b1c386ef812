"""Fake boto3 (see _stubstore, ../botocore): client("s3", aws_access_key_id=...) with list_objects_v2 paging and
download_file (the copier); Session(botocore_session=...).client(SERVICE, region_name=R, config=...) for the
helper's AWS_PROGRAM (templates/files/trainvm_helper.py): ec2 stop_instances / terminate_instances, recorded as
`ec2 ACTION INSTANCE`, and secretsmanager get_secret_value, recorded as `secretsmanager GetSecretValue NAME`, each
answering the real response's shape. Like the real service, a call whose credentials are not the instance role's
(IMDSv2's, pyfake/sitecustomize.py: ASIASTUB with its session token) is refused (AuthFailure /
UnrecognizedClientException, 401; no credentials at all: NoCredentialsError, as botocore raises before sending), so
is a region other than the VM's (us-east-1). STUB_AWS_EC2_FAIL: EC2 refuses as it does without the permission
(UnauthorizedOperation, 403). Secrets Manager answers STUB_SECRETS (JSON {"aws/NAME": value}; default
"s3cr3t-from-aws"; null: ResourceNotFoundException, 400). Not modelled: boto3's own retries (the real program runs
against moto's server in tests/aws/test_ec2_call.py)."""
import json
import os

import _stubstore
from botocore.exceptions import ClientError, NoCredentialsError

ROLE = ("ASIASTUB", "stub-secret-key", "stub-session")


def _error(status, code, message, op):
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, op)


def _log(*fields):
    with open(os.path.join(_stubstore.STATE, "calls.log"), "a", encoding="utf-8") as fh:
        fh.write("\t".join(fields) + "\n")


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


class _Api:
    def __init__(self, creds, region):
        self.creds, self.region = creds, region

    def _check(self, op, refused):
        if self.creds is None:
            raise NoCredentialsError()
        if (self.creds.access_key, self.creds.secret_key, self.creds.token) != ROLE or self.region != "us-east-1":
            raise _error(401, refused, "The security token included in the request is invalid.", op)


class _EC2(_Api):
    def _call(self, action, ids, key, state):
        self._check(action, "AuthFailure")
        _log("ec2", action, ids[0])
        if os.environ.get("STUB_AWS_EC2_FAIL"):
            raise _error(403, "UnauthorizedOperation", "You are not authorized to perform this operation.", action)
        return {key: [{"InstanceId": ids[0], "CurrentState": {"Code": 0, "Name": state},
                       "PreviousState": {"Code": 16, "Name": "running"}}], "ResponseMetadata": {"HTTPStatusCode": 200}}

    def stop_instances(self, InstanceIds):
        return self._call("StopInstances", InstanceIds, "StoppingInstances", "stopping")

    def terminate_instances(self, InstanceIds):
        return self._call("TerminateInstances", InstanceIds, "TerminatingInstances", "shutting-down")


class _SecretsManager(_Api):
    def get_secret_value(self, SecretId):
        self._check("GetSecretValue", "UnrecognizedClientException")
        _log("secretsmanager", "GetSecretValue", SecretId)
        table = json.loads(os.environ.get("STUB_SECRETS", "{}"))
        value = table.get("aws/" + SecretId, "s3cr3t-from-aws")
        if value is None:
            raise _error(400, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.", "GetSecretValue")
        return {"Name": SecretId, "SecretString": value, "ResponseMetadata": {"HTTPStatusCode": 200}}


class Session:
    def __init__(self, botocore_session=None, region_name=None):
        import botocore.session

        self._bs = botocore_session or botocore.session.get_session()
        self.region_name = region_name

    def client(self, service, region_name=None, config=None):
        creds = self._bs.get_credentials()
        _stubstore.record("s3", "client", service, "key=" + (creds.method if creds else "none"))
        api = {"ec2": _EC2, "secretsmanager": _SecretsManager}[service]
        return api(creds, region_name or self.region_name)


def client(service, **keys):
    _stubstore.record("s3", "client", service, "key=" + keys.get("aws_access_key_id", "instance-profile"))
    return _S3(keys)
