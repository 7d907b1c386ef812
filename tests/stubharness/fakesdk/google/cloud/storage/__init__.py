"""Fake google-cloud-storage (see _stubstore): Client() / Client.from_service_account_json(path), list_blobs."""
import json

import _stubstore


class _Blob:
    def __init__(self, bucket, name, size):
        self.bucket, self.name, self.size = bucket, name, size

    def download_to_filename(self, path):
        _stubstore.fetch(self.bucket, self.name, path)


class Client:
    def __init__(self, who="vm-service-account"):
        _stubstore.record("gs", "client", who)

    @classmethod
    def from_service_account_json(cls, path):
        return cls("key=" + json.load(open(path))["client_email"])

    def list_blobs(self, bucket, prefix=""):
        _stubstore.record("gs", "list", bucket, prefix)
        return [_Blob(bucket, k, s) for k, s in _stubstore.objects(bucket, prefix)]
