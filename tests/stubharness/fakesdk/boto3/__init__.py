"""Fake boto3 (see _stubstore): client("s3", aws_access_key_id=..., ...) with list_objects_v2 paging and download_file."""
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


def client(service, **keys):
    _stubstore.record("s3", "client", service, "key=" + keys.get("aws_access_key_id", "instance-profile"))
    return _S3(keys)
