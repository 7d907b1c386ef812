"""Fake azure-storage-blob (see _stubstore): ContainerClient(url, container, credential) with list_blobs and
download_blob(name).readinto(fh). Bucket folder: ACCOUNT/CONTAINER."""
import _stubstore


class _Blob:
    def __init__(self, name, size):
        self.name, self.size = name, size


class _Download:
    def __init__(self, bucket, name):
        self.bucket, self.name = bucket, name

    def readinto(self, fh):
        fh.write(_stubstore.content(self.bucket, self.name))


class ContainerClient:
    def __init__(self, url, container, credential=None):
        self.bucket = url.split("//", 1)[1].split(".", 1)[0] + "/" + container
        who = type(credential).__name__ if not isinstance(credential, (str, dict)) else ("sas" if isinstance(credential, str) else "account-key")
        _stubstore.record("az", "client", self.bucket, who)

    def list_blobs(self, name_starts_with=""):
        _stubstore.record("az", "list", self.bucket, name_starts_with)
        return [_Blob(k, s) for k, s in _stubstore.objects(self.bucket, name_starts_with)]

    def download_blob(self, name):
        return _Download(self.bucket, name)
