"""The stub world's network for the on-VM Python (the helper's secret readers and EC2 call): urllib.request.urlopen
answers the metadata servers (GCE, Azure IMDS, EC2 IMDSv2), EC2's StopInstances / TerminateInstances (recorded as
`ec2 ACTION INSTANCE`; a request not signed with the role's credentials for ec2 is refused as AuthFailure, and
STUB_AWS_EC2_FAIL answers UnauthorizedOperation, as EC2 does without the permission) and the secret stores
(Secret Manager, Key Vault, Secrets Manager) from STUB_SECRETS (JSON {"KIND/NAME": value}; default: every secret reads "s3cr3t-from-KIND"); a
secret set to null answers 404 like the real store. Each request is recorded in calls.log as
`http METHOD URL`. Any other URL is refused (the stub world has no network). Not modelled: IAM/scopes (any
token is accepted), token expiry, SigV4 verification (tests/render/test_secret_readers.py and
tests/aws/test_ec2_call.py check signing against botocore; moto's server runs the real EC2 call)."""
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
    if re.match(r"https://secretsmanager\.[a-z0-9-]+\.amazonaws\.com/$", url):
        value = _secret("aws", json.loads(body)["SecretId"])
        return None if value is None else {"SecretString": value}
    raise urllib.error.URLError("the stub world has no network (%s)" % url)


def _urlopen(req, data=None, timeout=None, **kw):
    if isinstance(req, str):
        req = urllib.request.Request(req, data)
    url, method = req.full_url, req.get_method()
    with open(os.path.join(_STATE, "calls.log"), "a", encoding="utf-8") as fh:
        fh.write("http\t%s\t%s\n" % (method, url))
    if re.match(r"https://ec2\.[a-z0-9-]+\.amazonaws\.com/$", url):
        return _ec2(req)
    answer = _answer(method, url, req.data)
    if answer is None:
        raise urllib.error.HTTPError(url, 404, "Not Found", {}, io.BytesIO(b""))
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return io.BytesIO(text.encode("utf-8"))


def _ec2(req):
    form = dict(urllib.parse.parse_qsl(req.data.decode()))
    with open(os.path.join(_STATE, "calls.log"), "a", encoding="utf-8") as fh:
        fh.write("ec2\t%s\t%s\n" % (form.get("Action"), form.get("InstanceId.1")))
    headers = {k.lower(): v for k, v in req.header_items()}
    signed = headers.get("authorization", "").startswith("AWS4-HMAC-SHA256 Credential=ASIASTUB/") and \
        "/us-east-1/ec2/aws4_request" in headers["authorization"] and headers.get("x-amz-security-token") == "stub-session"
    code = None if signed else "AuthFailure"
    code = code or ("UnauthorizedOperation" if os.environ.get("STUB_AWS_EC2_FAIL") else None)
    if code:
        body = ("<Response><Errors><Error><Code>%s</Code><Message>You are not authorized to perform this operation.</Message>"
                "</Error></Errors><RequestID>stub</RequestID></Response>" % code)
        raise urllib.error.HTTPError(req.full_url, 403 if code == "UnauthorizedOperation" else 401, code, {}, io.BytesIO(body.encode()))
    state = {"StopInstances": "stopping", "TerminateInstances": "shutting-down"}[form["Action"]]
    return io.BytesIO(("<%sResponse><instancesSet><item><instanceId>%s</instanceId><currentState><code>0</code><name>%s</name>"
                       "</currentState><previousState><code>16</code><name>running</name></previousState></item></instancesSet>"
                       "</%sResponse>" % (form["Action"], form["InstanceId.1"], state, form["Action"])).encode())


if _STATE:
    urllib.request.urlopen = _urlopen
