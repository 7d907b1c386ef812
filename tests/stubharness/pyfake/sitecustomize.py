"""The stub world's network for the on-VM Python (the helper's secret readers): urllib.request.urlopen
answers the metadata servers (GCE, Azure IMDS, EC2 IMDSv2) and the secret stores (Secret Manager, Key Vault; EC2
and Secrets Manager are called through boto3: fakesdk/boto3, whose botocore reads IMDSv2 here) from STUB_SECRETS (JSON {"KIND/NAME": value}; default: every secret reads "s3cr3t-from-KIND"); a
secret set to null answers 404 like the real store. Each request is recorded in calls.log as
`http METHOD URL`. Any other URL is refused (the stub world has no network). Not modelled: IAM/scopes (any
token is accepted), token expiry. ACR's /oauth2/exchange answers a refresh token to the form grant_type=access_token,
service=REGISTRY, access_token=the IMDS token (401 otherwise); not modelled there: the tenant parameter, AcrPull role
checks, the refresh token's expiry."""
import base64
import io
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request

_STATE = os.environ.get("STUB_STATE", "")


def _secret(kind, name):
    table = json.loads(os.environ.get("STUB_SECRETS", "{}"))
    key = "%s/%s" % (kind, name)
    return table[key] if key in table else "s3cr3t-from-%s" % kind.split("-")[0]


def _answer(method, url, body):
    if url.endswith("/computeMetadata/v1/instance/service-accounts/default/token") or "/metadata/identity/oauth2/token" in url:
        return {"access_token": "stub-token", "expires_in": 3599, "token_type": "Bearer"}
    if url.endswith("/computeMetadata/v1/project/project-id"):
        return "test-proj"
    m = re.match(r"https://secretmanager\.googleapis\.com/v1/projects/[^/]+/secrets/([^/]+)/versions/latest:access$", url)
    if m:
        value = _secret("gcp", m.group(1))
        return None if value is None else {"payload": {"data": base64.b64encode(value.encode()).decode()}}
    m = re.match(r"https://([a-z0-9-]+)\.vault\.azure\.net/secrets/([^?]+)\?", url)
    if m:
        value = _secret("azure-keyvault", m.group(1) + "/" + m.group(2))
        return None if value is None else {"value": value}
    m = re.match(r"https://([a-z0-9]{5,50}\.azurecr\.io)/oauth2/exchange$", url)
    if m and method == "POST":  # ACR's AAD token exchange (github.com/Azure/acr docs/AAD-OAuth.md): form in, refresh token out
        form = urllib.parse.parse_qs((body or b"").decode())
        if form.get("grant_type") != ["access_token"] or form.get("service") != [m.group(1)] or form.get("access_token") != ["stub-token"]:
            raise urllib.error.HTTPError(url, 401, "Unauthorized", {}, io.BytesIO(b'{"errors":[{"code":"UNAUTHORIZED"}]}'))
        return {"refresh_token": "acr-refresh-for-" + m.group(1)}
    if url.endswith("/latest/api/token"):
        return "stub-imds-token"
    if url.endswith("/latest/meta-data/placement/region"):
        return "us-east-1"
    if url.endswith("/latest/meta-data/iam/security-credentials/"):
        return "trainvm-role"
    if url.endswith("/latest/meta-data/iam/security-credentials/trainvm-role"):
        return {"AccessKeyId": "ASIASTUB", "SecretAccessKey": "stub-secret-key", "Token": "stub-session"}
    if url.endswith("/latest/meta-data/instance-id"):
        return "i-0123456789abcdef0"
    raise urllib.error.URLError("the stub world has no network (%s)" % url)


def _urlopen(req, data=None, timeout=None, **kw):
    if isinstance(req, str):
        req = urllib.request.Request(req, data)
    url, method = req.full_url, req.get_method()
    with open(os.path.join(_STATE, "calls.log"), "a", encoding="utf-8") as fh:
        fh.write("http\t%s\t%s\n" % (method, url))
    answer = _answer(method, url, req.data)
    if answer is None:
        raise urllib.error.HTTPError(url, 404, "Not Found", {}, io.BytesIO(b""))
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return io.BytesIO(text.encode("utf-8"))


if _STATE:
    urllib.request.urlopen = _urlopen
