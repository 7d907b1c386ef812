#!/usr/bin/env python3
# trainvm on-VM helper (stdlib only, Python >= 3.8), written by the startup script. The GPU gate, the
# stack check and the report are the agent's (python3 -m provisioner.agent: tv_agent). Commands:
#   env          /etc/trainvm/env and secrets.env (secret:// resolved), both 0600 and root's, from the manifest
#   redact       stdin to stdout, line by line, with URL userinfo, query strings, signatures, tokens,
#                the values of secrets.env and the data credentials replaced by *** (the console and provision.log)
#   credential REF FILE  a data[].credential (secret://...) read with the VM's identity into FILE (0600)
#   ec2 stop|terminate  EC2 StopInstances / TerminateInstances of this instance with its instance profile
#                (boto3 of the s3 tool's venv: AWS_PROGRAM); exit 0 once it is stopping / shutting down, 1 when EC2
#                refused (the error's code on stderr), boto3's retries ran out or the SDK is missing (trainvm-lifecycle
#                then falls back where that is safe)
#   registry-login METHOD HOST [ARG]  the docker config of the image's pull (REGISTRY_AUTH/config.json, 0600 in a 0700
#                folder; the script removes it after the pull): METHOD secret (ARG: secret://...), gcp-token, ecr (ARG: the
#                region) or acr; never printed, and hidden by redact while it exists
#   driver-pin PKG...  apt preferences pinning the source packages of PKG's dependency closure
#                at the driver's version; the closure's names to driver-packages
# Paths are under $TRAINVM_ROOT; the manifest is /var/lib/trainvm/expected.json.
import base64
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.environ.get("TRAINVM_ROOT", "")
STATE = ROOT + "/var/lib/trainvm"
AGENT = ROOT + "/opt/trainvm/current/agent"  # the payload's agent folder (tv_agent's PYTHONPATH)


def load(name):
    try:
        with open(os.path.join(STATE, name), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def run(argv, timeout=300, stderr=subprocess.STDOUT):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=stderr, timeout=timeout, universal_newlines=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, str(exc)
    return p.returncode, p.stdout


def read(path):
    try:
        with open(ROOT + path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def env_quote(value):
    # systemd EnvironmentFile= and POSIX sh both unescape exactly \ " ` $ inside double quotes
    return '"' + re.sub(r'([\\"`$])', r"\\\1", value) + '"'


def http(url, headers, data=None, method=None):  # the response body of one HTTPS/metadata request (30 s)
    return urllib.request.urlopen(urllib.request.Request(url, data, headers, method=method), timeout=30).read().decode("utf-8")


def secret_gcp(name):  # Secret Manager with the VM's service account (metadata-server token, cloud-platform scope)
    md, flavour = "http://metadata.google.internal/computeMetadata/v1/", {"Metadata-Flavor": "Google"}
    token = json.loads(http(md + "instance/service-accounts/default/token", flavour))["access_token"]
    url = "https://secretmanager.googleapis.com/v1/projects/%s/secrets/%s/versions/latest:access" % (http(md + "project/project-id", flavour), name)
    return base64.b64decode(json.loads(http(url, {"Authorization": "Bearer " + token}))["payload"]["data"]).decode("utf-8")


def aws_md(*paths):  # IMDSv2: this instance's metadata (region, instance id; never credentials: boto3 reads those)
    imds = "http://169.254.169.254/latest/"
    tok = {"X-aws-ec2-metadata-token": http(imds + "api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "300"}, method="PUT")}
    return [http(imds + "meta-data/" + p, tok).strip() for p in paths]


# Every AWS API call of this VM: boto3 of the s3 tool's venv (the hash-locked templates/datatools/s3-OS.txt, installed
# by the startup script's tv_aws_sdk), credentials only from botocore's own instance-metadata provider (IMDSv2: the
# instance profile; nothing passes keys around), throttling / 5xx / network errors retried by boto3 itself (3
# attempts). argv: SERVICE OPERATION REGION PARAMS-JSON. The response on stdout as JSON; an error as one line on
# stderr, "STATUS CODE MESSAGE" (exit 1) or the SDK's own error (exit 3).
AWS_SDK = ROOT + "/opt/trainvm/datatools/s3/bin/python"
AWS_PROGRAM = r"""
import json, re, sys
import boto3, botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
service, op, region, params = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
bs = botocore.session.get_session()
chain = bs.get_component("credential_provider")
for name in [p.METHOD for p in chain.providers if p.METHOD != "iam-role"]:
    chain.remove(name)
try:
    if bs.get_credentials() is None:
        sys.stderr.write("no instance profile credentials from the instance metadata service\n")
        sys.exit(3)
    client = boto3.Session(botocore_session=bs).client(service, region_name=region, config=Config(
        retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=10, read_timeout=30))
    sys.stdout.write(json.dumps(getattr(client, op)(**params), default=str))
except ClientError as exc:
    err, meta = exc.response.get("Error", {}), exc.response.get("ResponseMetadata", {})
    code, message = str(err.get("Code", "")), str(err.get("Message", ""))
    if not re.fullmatch(r"[A-Za-z][\w.]*", code):  # a body botocore could not parse (it may echo the request): its code only
        found = re.search(r"<Code>([\w.]+)</Code>|\"__type\"\s*:\s*\"(?:[^\"#]*#)?([\w.]+)\"", code + " " + message)
        code, message = (found.group(1) or found.group(2)) if found else "Unknown", ""
    message = " ".join(message.split())
    sys.stderr.write("%s %s %s\n" % (meta.get("HTTPStatusCode", 0), code, message))
    sys.exit(1)
except BotoCoreError as exc:
    sys.stderr.write("%s: %s\n" % (type(exc).__name__, exc))
    sys.exit(3)
"""


def aws_call(service, op, region, params):  # (0, response) or (exit code, its error line) of one call through boto3
    if not os.access(AWS_SDK, os.X_OK):
        return 3, "the AWS SDK (boto3 in %s) is not installed on this VM" % AWS_SDK[len(ROOT):].rsplit("/bin/", 1)[0]
    try:
        p = subprocess.run([AWS_SDK, "-c", AWS_PROGRAM, service, op, region, json.dumps(params)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        return 3, str(exc)
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        return p.returncode, (lines[-1] if lines else "exit %d" % p.returncode)[:400]
    return 0, json.loads(p.stdout)


def secret_aws(name):  # Secrets Manager GetSecretValue with the instance profile: a name in the VM's region, an ARN in its own
    region = name.split(":")[3] if name.startswith("arn:") else aws_md("placement/region")[0]
    rc, out = aws_call("secretsmanager", "get_secret_value", region, {"SecretId": name})
    if rc == 1:  # the error's status and code only
        raise RuntimeError("Secrets Manager answered %s" % " ".join(out.split()[:2]))
    if rc != 0:
        raise RuntimeError("Secrets Manager GetSecretValue failed: %s" % out)
    return out["SecretString"]


def api_aws(verb):  # ec2 stop|terminate (trainvm-lifecycle): 0 once stopping / shutting down, 1 otherwise
    if verb not in ("stop", "terminate"):
        return 2
    action = verb.title() + "Instances"
    try:
        region, instance = aws_md("placement/region", "instance-id")
        rc, out = aws_call("ec2", verb + "_instances", region, {"InstanceIds": [instance]})
    except (OSError, ValueError) as exc:
        rc, out = 3, "instance metadata: %s" % exc
    if rc != 0:
        print("EC2 %s failed: %s" % (action, out), file=sys.stderr)
        return 1
    state = [v for k, v in out.items() if k.endswith("Instances")][0][0]["CurrentState"]["Name"]
    print("EC2 %s: %s" % (action, state))
    return 0 if state in ("stopping", "stopped", "shutting-down", "terminated") else 1


def secret_azure_keyvault(rest):  # Key Vault with the VM's managed identity (IMDS token)
    vault, _, name = rest.partition("/")
    token = json.loads(http("http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fvault.azure.net",
                            {"Metadata": "true"}))["access_token"]
    return json.loads(http("https://%s.vault.azure.net/secrets/%s?api-version=7.4" % (vault, urllib.parse.quote(name)),
                           {"Authorization": "Bearer " + token}))["value"]


def resolve_secret(ref, lines=False):  # secret://KIND/REST through secret_KIND (the script keeps only the kinds the profile uses)
    kind, _, rest = ref[len("secret://"):].partition("/")
    fetch = globals().get("secret_" + kind.replace("-", "_"))
    value = fetch(rest) if fetch else None
    if value is None:
        raise RuntimeError("secret %s could not be read" % ref)
    if any(ord(c) < 32 and c not in ("\t\r\n" if lines else "\t") for c in value):
        raise RuntimeError("secret %s contains newlines or control characters" % ref)
    return value


def hidden_values():  # the values of /etc/trainvm/secrets.env (and of the data credentials: cred_hidden)
    out = [re.sub(r"\\(.)", r"\1", v) for v in re.findall(r'^\w+="(.{4,})"$', read("/etc/trainvm/secrets.env"), re.M)]
    more = globals().get("cred_hidden")  # kept by the script only where the profile has data credentials
    return out + (more() if more else []) + registry_hidden()


# The registry login of a container stack (providers/registry_auth.py decides the METHOD at render time)
REGISTRY_AUTH = STATE + "/registry-auth"
ACR_USER = "00000000-0000-0000-0000-000000000000"  # the user of an ACR refresh token (Azure/acr docs/AAD-OAuth.md)


def registry_hidden():  # the password and auth of the pull's docker config while it exists
    try:
        with open(REGISTRY_AUTH + "/config.json", encoding="utf-8") as fh:
            auths = json.load(fh).get("auths", {})
    except (OSError, ValueError, AttributeError):
        return []
    out = []
    for entry in auths.values():
        auth = str(entry.get("auth", ""))
        out += [auth, base64.b64decode(auth).decode("utf-8", "replace").partition(":")[2]] if auth else []
    return [v for v in out if len(v) >= 4]


def registry_credential(method, host, arg):  # (user, password) for docker, with the VM's identity or a secret
    if method == "secret":  # user:password, or a token alone (user $oauthtoken: NGC's convention)
        value = resolve_secret(arg).strip()
        user, sep, password = value.partition(":")
        return (user, password) if sep and user else ("$oauthtoken", value)
    if method == "gcp-token":  # Artifact Registry / GCR: the metadata server's access token (user oauth2accesstoken)
        url = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
        return "oauth2accesstoken", json.loads(http(url, {"Metadata-Flavor": "Google"}))["access_token"]
    if method == "ecr":  # GetAuthorizationToken with the instance profile: base64 of AWS:PASSWORD, valid 12 hours
        rc, out = aws_call("ecr", "get_authorization_token", arg, {})
        if rc != 0:
            raise RuntimeError("ECR GetAuthorizationToken failed: %s" % (" ".join(out.split()[:2]) if rc == 1 else out))
        user, _, password = base64.b64decode(out["authorizationData"][0]["authorizationToken"]).decode("utf-8").partition(":")
        return user, password
    if method == "acr":  # the managed identity's token exchanged for an ACR refresh token
        imds = "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.azure.com%2F"
        aad = json.loads(http(imds, {"Metadata": "true"}))["access_token"]
        form = urllib.parse.urlencode({"grant_type": "access_token", "service": host, "access_token": aad}).encode()
        answer = http("https://%s/oauth2/exchange" % host, {"Content-Type": "application/x-www-form-urlencoded"}, form, "POST")
        return ACR_USER, json.loads(answer)["refresh_token"]
    raise RuntimeError("unknown registry login %r" % method)


def registry_login(method, host, arg):  # 0: REGISTRY_AUTH/config.json written; 1: why not, on stderr (no secret in it)
    try:
        user, password = registry_credential(method, host, arg)
    except urllib.error.HTTPError as exc:
        print("registry-login: %s answered HTTP %s" % (urllib.parse.urlsplit(exc.url or "").netloc, exc.code), file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 (any failure is the login's)
        print("registry-login: %s" % (exc.__class__.__name__ if isinstance(exc, KeyError) else exc), file=sys.stderr)
        return 1
    key = "https://index.docker.io/v1/" if host == "registry-1.docker.io" else host  # docker's key for Docker Hub
    auth = base64.b64encode(("%s:%s" % (user, password)).encode("utf-8")).decode()
    os.makedirs(REGISTRY_AUTH, mode=0o700, exist_ok=True)
    os.chmod(REGISTRY_AUTH, 0o700)
    path = REGISTRY_AUTH + "/config.json"
    with os.fdopen(os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as fh:
        json.dump({"auths": {key: {"auth": auth}}}, fh)
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)
    return 0


def cred_hidden():  # each data credential, its lines and its JSON string values
    out = []
    folder = ROOT + "/etc/trainvm/credentials"
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        text = read("/etc/trainvm/credentials/" + name).strip()
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        parts = [text] + [v for v in (doc.values() if isinstance(doc, dict) else []) if isinstance(v, str)]
        out += [text] * (len(text) >= 4) + [ln.strip() for p in parts for ln in p.splitlines() if len(ln.strip()) >= 16]
    return out


def redact(text):  # the secrets on this VM (hidden_values), then the workstation's redactor: provisioner/secrets.py,
    # shipped in the payload's agent folder (one implementation; a missing copy withholds the line: cmd_redact)
    for value in sorted(set(hidden_values()), key=len, reverse=True):
        text = text.replace(value, "***")
    if AGENT not in sys.path:
        sys.path.insert(0, AGENT)
    from provisioner.secrets import redact as redact_credentials
    return redact_credentials(text)


def cmd_redact(exp):  # the filter in front of the console and provision.log; never stops the script's output
    for line in iter(sys.stdin.buffer.readline, b""):
        text = line.decode("utf-8", "replace")
        try:
            text = text if text.startswith("TRAINVM_REPORT=") else redact(text)  # the report's error is redacted by tv_report
        except Exception:
            text = "trainvm: (line withheld: redaction failed)\n"
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def cred_file(ref, path):  # never printed: the redact filter hides its content from here on
    try:
        value = resolve_secret(ref, lines=True)
    except Exception as exc:
        print("credential: %s" % exc, file=sys.stderr)
        return 1
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with os.fdopen(os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as fh:
        fh.write(value)
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)
    return 0


def write_env(name, lines, mode):  # True when /etc/trainvm/NAME changed (content or mode)
    path = ROOT + "/etc/trainvm/" + name
    if not lines:
        if os.path.exists(path):
            os.remove(path)
            return True
        return False
    text = "\n".join(lines) + "\n"
    if read("/etc/trainvm/" + name) == text and os.stat(path).st_mode & 0o777 == mode:
        return False
    with os.fdopen(os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(path + ".tmp", mode)
    os.replace(path + ".tmp", path)
    return True


def cmd_env(exp):  # env and secrets.env (resolved secret:// values): 0600, owned by the user running this (root)
    public, secret = ["# trainvm: the profile's stack.env (systemd EnvironmentFile= and sh)"], []
    for key, value in sorted(exp["env"].items()):
        if value.startswith("secret://"):
            try:
                secret.append("%s=%s" % (key, env_quote(resolve_secret(value))))
            except Exception as exc:
                print("env %s: %s" % (key, exc), file=sys.stderr)
                return 1
        else:
            public.append("%s=%s" % (key, env_quote(value)))
    # 0600: a value that slips past validate's secret checks is not for every local user to read; trainvm-run jobs
    # get it from systemd (EnvironmentFile= is read by PID 1, as root)
    changed = write_env("env", public, 0o600)
    changed = write_env("secrets.env", ["# trainvm: secret:// values of stack.env"] + secret if secret else [], 0o600) or changed
    print("changed" if changed else "unchanged")
    return 0


def apt_indexes():  # the text of every Packages index apt has downloaded
    for path in run(["apt-get", "indextargets", "--format", "$(FILENAME)", "Created-By: Packages"], stderr=subprocess.DEVNULL)[1].split():
        if path.endswith("Packages"):
            with open(path, encoding="utf-8", errors="replace") as fh:
                yield fh.read()
        else:
            yield run(["/usr/lib/apt/apt-helper", "cat-file", path], stderr=subprocess.DEVNULL)[1]


def dep_names(value):
    return [re.split(r"[\s(:]", a.strip())[0] for a in re.split(r"[,|]", value) if a.strip()]


def cmd_driver_pin(exp, roots):
    want, pkgs, provides, closure = exp["driver"] + "-", {}, {}, {}
    for text in apt_indexes():
        for block in text.split("\n\n"):
            st = dict(re.findall(r"^([\w-]+):[ \t]*(.*)$", block, re.M))
            if re.sub(r"^\d+:", "", st.get("Version", "")).startswith(want) and "Package" in st:
                pkgs.setdefault(st["Package"], st)
                for p in dep_names(st.get("Provides", "")):
                    provides.setdefault(p, []).append(st["Package"])
    queue = list(roots)
    while queue:
        name = queue.pop()
        for p in [name] + provides.get(name, []):
            if p in pkgs and p not in closure:
                closure[p] = pkgs[p].get("Source", p).split()[0]
                queue += dep_names(",".join(pkgs[p].get(f, "") for f in ("Pre-Depends", "Depends", "Recommends")))
    if roots[0] not in closure:
        return 1
    with open(STATE + "/driver-packages", "w") as fh:
        fh.write("\n".join(sorted(closure)) + "\n")
    print("Package: %s\nPin: version %s*\nPin-Priority: 1000" % (" ".join("src:" + s for s in sorted(set(closure.values()))), want))
    return 0


def main(argv):
    exp, cmd = load("expected.json"), argv[1] if len(argv) > 1 else ""
    commands = {"env": cmd_env, "redact": cmd_redact}
    if cmd == "ec2" and len(argv) == 3 and "api_aws" in globals():
        return globals()["api_aws"](argv[2])
    if exp is None:
        print("trainvm helper: %s/expected.json is missing" % STATE, file=sys.stderr)
        return 2
    if cmd == "registry-login" and len(argv) in (4, 5):
        return registry_login(argv[2], argv[3], argv[4] if len(argv) == 5 else "")
    if cmd == "credential" and len(argv) == 4 and "cred_file" in globals():
        return globals()["cred_file"](argv[2], argv[3])
    if cmd == "driver-pin" and len(argv) > 2:
        return cmd_driver_pin(exp, argv[2:])
    if cmd in commands:
        return commands[cmd](exp)
    print("usage: trainvm_helper.py env|redact|credential REF FILE|driver-pin PKG...|ec2 stop|terminate", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
