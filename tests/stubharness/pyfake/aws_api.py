"""The stub world's EC2 and Secrets Manager for the helper's ``aws_curl`` (curl --aws-sigv4, the credentials in a
curl config on stdin): StopInstances / TerminateInstances are recorded in calls.log as `ec2 ACTION INSTANCE`; a
request whose config does not hold the role's key pair and session token (IMDSv2's, pyfake/sitecustomize.py), or
whose --aws-sigv4 scope is not REGION:SERVICE of the URL, is refused as AuthFailure (401); STUB_AWS_EC2_FAIL answers
UnauthorizedOperation (403), as EC2 does without the permission. Secrets Manager answers STUB_SECRETS (JSON
{"aws/NAME": value}; default "s3cr3t-from-aws"; null: ResourceNotFoundException). Prints the body, then
"\\n" + the status when -w is given, as the real curl does with -w '\\n%{http_code}'. Not modelled: the
signature itself (tests/aws/test_ec2_call.py runs the real curl against moto's server with signature checks on)."""
import json
import os
import re
import sys
import urllib.parse

args = sys.argv[1:]
config = sys.stdin.read() if "-K" in args else ""
url = next(a for a in args if a.startswith(("http://", "https://")))
scope = args[args.index("--aws-sigv4") + 1]
body = args[args.index("--data-binary") + 1] if "--data-binary" in args else ""
signed = 'user = "ASIASTUB:stub-secret-key"' in config and 'header = "x-amz-security-token: stub-session"' in config
m = re.match(r"https://(ec2|secretsmanager)\.([a-z0-9-]+)\.amazonaws\.com/$", url)
status, text = 404, "<Error><Code>NoSuchHost</Code></Error>"
if m and (not signed or scope != "aws:amz:%s:%s" % (m.group(2), m.group(1))):
    status = 401
    text = ("<Response><Errors><Error><Code>AuthFailure</Code><Message>AWS was not able to validate the provided access "
            "credentials</Message></Error></Errors><RequestID>stub</RequestID></Response>")
elif m and m.group(1) == "ec2":
    form = dict(urllib.parse.parse_qsl(body))
    with open(os.path.join(os.environ.get("STUB_STATE", ""), "calls.log"), "a", encoding="utf-8") as fh:
        fh.write("ec2\t%s\t%s\n" % (form.get("Action"), form.get("InstanceId.1")))
    if os.environ.get("STUB_AWS_EC2_FAIL"):
        status = 403
        text = ("<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform "
                "this operation.</Message></Error></Errors><RequestID>stub</RequestID></Response>")
    else:
        state = {"StopInstances": "stopping", "TerminateInstances": "shutting-down"}[form["Action"]]
        status = 200
        text = ('<%sResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><instancesSet><item><instanceId>%s</instanceId>'
                "<currentState><code>0</code><name>%s</name></currentState><previousState><code>16</code><name>running</name>"
                "</previousState></item></instancesSet></%sResponse>" % (form["Action"], form["InstanceId.1"], state, form["Action"]))
elif m:
    name = json.loads(body)["SecretId"]
    table = json.loads(os.environ.get("STUB_SECRETS", "{}"))
    value = table.get("aws/" + name, "s3cr3t-from-aws")
    status, text = (200, json.dumps({"SecretString": value})) if value is not None else (
        400, json.dumps({"__type": "ResourceNotFoundException", "message": "Secrets Manager can't find the specified secret."}))
sys.stdout.write(text + ("\n%d" % status if "-w" in args else ""))
