import json
import os
import urllib.request

try:  # the stub world's network (the real interpreter runs isolated with -S: site does not load it)
    import sitecustomize  # noqa: F401
except ImportError:
    pass

IMDS = "http://169.254.169.254/latest/"


class Credentials:
    def __init__(self, access_key, secret_key, token, method):
        self.access_key, self.secret_key, self.token, self.method = access_key, secret_key, token, method


class _Provider:
    def __init__(self, method):
        self.METHOD = method

    def load(self):
        if self.METHOD == "env" and os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY"):
            return Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"],
                               os.environ.get("AWS_SESSION_TOKEN"), "env")
        if self.METHOD == "iam-role" and os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() != "true":
            try:
                tok = urllib.request.urlopen(urllib.request.Request(
                    IMDS + "api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"}, method="PUT"),
                    timeout=1).read().decode()
                hdr = {"X-aws-ec2-metadata-token": tok}
                get = lambda p: urllib.request.urlopen(urllib.request.Request(IMDS + "meta-data/" + p, headers=hdr),  # noqa: E731
                                                       timeout=1).read().decode()
                role = get("iam/security-credentials/").split()[0]
                keys = json.loads(get("iam/security-credentials/" + role))
            except Exception:  # the real provider logs and answers "no credentials"
                return None
            return Credentials(keys["AccessKeyId"], keys["SecretAccessKey"], keys.get("Token"), "iam-role")
        return None


class CredentialResolver:
    def __init__(self):
        self.providers = [_Provider(m) for m in ("env", "assume-role", "assume-role-with-web-identity", "sso",
                                                 "shared-credentials-file", "custom-process", "config-file",
                                                 "ec2-credentials-file", "boto-config", "container-role", "iam-role")]

    def remove(self, name):
        self.providers = [p for p in self.providers if p.METHOD != name]

    def load_credentials(self):
        for p in self.providers:
            creds = p.load()
            if creds is not None:
                return creds
        return None


class Session:
    def __init__(self):
        self._resolver = CredentialResolver()

    def get_component(self, name):
        assert name == "credential_provider", name
        return self._resolver

    def get_credentials(self):
        return self._resolver.load_credentials()


def get_session():
    return Session()
