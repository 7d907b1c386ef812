#!/usr/bin/env python3
# trainvm on-VM helper (stdlib only, Python >= 3.8), written by the startup script. The GPU gate, the
# stack check and the report are the agent's (python3 -m provisioner.agent: tv_agent). Commands:
#   env          /etc/trainvm/env (0644) and secrets.env (0600, secret:// resolved) from the manifest
#   redact       stdin to stdout, line by line, with URL userinfo, query strings, signatures, tokens,
#                the values of secrets.env and the data credentials replaced by *** (the console and provision.log)
#   credential REF FILE  a data[].credential (secret://...) read with the VM's identity into FILE (0600)
#   ec2 stop|terminate  EC2 StopInstances / TerminateInstances of this instance with its instance profile
#                (IMDSv2 credentials, curl --aws-sigv4); exit 0 once it is stopping / shutting down, 1 when EC2 refused
#                (the error's code on stderr) or failed 3 times (trainvm-lifecycle then falls back)
#   driver-pin PKG...  apt preferences pinning the source packages of PKG's dependency closure
#                at the driver's version; the closure's names to driver-packages
# Paths are under $TRAINVM_ROOT; the manifest is /var/lib/trainvm/expected.json.
import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

ROOT = os.environ.get("TRAINVM_ROOT", "")
STATE = ROOT + "/var/lib/trainvm"


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


def aws_role():  # IMDSv2: a metadata reader, the region and the instance profile's credentials
    imds = "http://169.254.169.254/latest/"
    tok = {"X-aws-ec2-metadata-token": http(imds + "api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "300"}, method="PUT")}

    def md(path):
        return http(imds + "meta-data/" + path, tok)

    role = md("iam/security-credentials/").split()[0]
    return md, md("placement/region"), json.loads(md("iam/security-credentials/" + role))


def secret_aws(name, sm="https://secretsmanager.{}.amazonaws.com/"):  # Secrets Manager GetSecretValue with the instance profile; tests give SM
    md, region, keys = aws_role()
    status, text = aws_curl(keys, region, "secretsmanager", sm.format(region), json.dumps({"SecretId": name}),
                            {"content-type": "application/x-amz-json-1.1", "x-amz-target": "secretsmanager.GetSecretValue"})
    if status != 200:  # the error's code only: an error body may echo the signed request
        code = re.search(r'"__type"\s*:\s*"(?:[^"#]*#)?([\w.]+)"|<Code>([\w.]+)</Code>', text)
        raise RuntimeError("Secrets Manager answered %d %s" % (status, code and (code.group(1) or code.group(2))))
    return json.loads(text)["SecretString"]


def api_aws(verb, ec2="https://ec2.{}.amazonaws.com/"):  # ec2 stop|terminate (trainvm-lifecycle); tests give EC2
    if verb not in ("stop", "terminate"):
        return 2
    action, err = verb.title() + "Instances", ""
    for attempt in range(3):  # bounded: a network error, a 5xx or EC2's throttling is tried again
        time.sleep(attempt * 5)
        try:
            md, region, keys = aws_role()
            body = urllib.parse.urlencode({"Action": action, "InstanceId.1": md("instance-id"), "Version": "2016-11-15"})
            status, text = aws_curl(keys, region, "ec2", ec2.format(region), body,
                                    {"content-type": "application/x-www-form-urlencoded; charset=utf-8"})
            doc = ET.fromstring(text) if text.lstrip().startswith("<") else ET.Element("empty")
            if status == 200:  # <TerminateInstancesResponse>...<currentState><code>32</code><name>shutting-down</name>
                state = doc.findtext(".//{*}currentState/{*}name")
                print("EC2 %s: %s" % (action, state))
                return 0 if state in ("stopping", "stopped", "shutting-down", "terminated") else 1
            # <Response><Errors><Error><Code>C</Code><Message>M</Message></Error></Errors>...
            err = ("%d %s %s" % (status, doc.findtext(".//{*}Code") or "", doc.findtext(".//{*}Message") or "")).strip()[:400]
            if status < 500 and doc.findtext(".//{*}Code") != "RequestLimitExceeded":
                break
        except (OSError, ValueError, IndexError, ET.ParseError, subprocess.SubprocessError) as exc:
            err = str(exc)
    print("EC2 %s failed: %s" % (action, err), file=sys.stderr)
    return 1


def aws_curl(keys, region, service, url, body, headers):  # (HTTP status, body) of a POST signed by curl's --aws-sigv4
    # the key pair and session token reach curl only through its config on stdin (-K -): never argv, a file or output
    quote = lambda v: '"%s"' % v.replace("\\", "\\\\").replace('"', '\\"')  # noqa: E731
    config = "user = %s\n" % quote(keys["AccessKeyId"] + ":" + keys["SecretAccessKey"])
    if keys.get("Token"):
        config += "header = %s\n" % quote("x-amz-security-token: " + keys["Token"])
    argv = ["curl", "-sS", "--connect-timeout", "10", "--max-time", "30", "--aws-sigv4", "aws:amz:%s:%s" % (region, service),
            "-K", "-", "--data-binary", body, "-w", "\n%{http_code}", url]
    for name, value in sorted(headers.items()):
        argv[1:1] = ["-H", "%s: %s" % (name, value)]
    p = subprocess.run(argv, input=config, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    if p.returncode != 0:
        raise OSError("curl exited with %d: %s" % (p.returncode, p.stderr.strip()[-200:]))
    text, _, status = p.stdout.rpartition("\n")
    return int(status), text


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


# URL userinfo (1), query and token parameter values: signed URLs, sig=, token= (2), bearer tokens (3)
REDACT = re.compile(r"(?i)(\w://)[^\s/@'\"]+@|([?&][\w.-]+=|\b(?:sig|token|signature|password|sas)=)[^\s&'\"#]+|(\bbearer\s+)[\w.~+/=-]+")


def hidden_values():  # the values of /etc/trainvm/secrets.env (and of the data credentials: cred_hidden)
    out = [re.sub(r"\\(.)", r"\1", v) for v in re.findall(r'^\w+="(.{4,})"$', read("/etc/trainvm/secrets.env"), re.M)]
    more = globals().get("cred_hidden")  # kept by the script only where the profile has data credentials
    return out + (more() if more else [])


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


def redact(text):  # ... and the secrets on this VM (hidden_values)
    for value in sorted(set(hidden_values()), key=len, reverse=True):
        text = text.replace(value, "***")
    return REDACT.sub(lambda m: m.group(1) + "***@" if m.group(1) else (m.group(2) or m.group(3)) + "***", text)


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


def cmd_env(exp):  # env: readable by every shell (0644); secrets.env: resolved secret:// values, root only
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
    changed = write_env("env", public, 0o644)
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
