"""Field-level checks for profile values: names, exact versions, pins, GPU names, paths,
data URLs and credential-looking strings. Each raises ``ValueError`` with a user-facing text;
pydantic turns that into a located message."""

from __future__ import annotations

import difflib
import ipaddress
import re
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from provisioner.compat.facts import load_facts
from provisioner.providers.registry import CLOUDS, PUBLIC_SCHEMES, or_list
from provisioner.secrets import HEX40_WHAT, HEX64_WHAT, find_secret, redact

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,40}$")
DRIVER_RE = re.compile(r"^\d{3}\.\d{2,3}(\.\d{2})?$")
CUDA_RE = re.compile(r"^\d{2}\.\d$")
PYTHON_RE = re.compile(r"^3\.\d{1,2}\.\d{1,2}$")
CUDNN_RE = re.compile(r"^\d+(\.\d+){0,3}$")
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
SAFE_PATH_RE = re.compile(r"^/[A-Za-z0-9._/@+-]*$")
REL_PATH_RE = re.compile(r"^[A-Za-z0-9._/@+-]+$")
GLOB_RE = re.compile(r"^[a-z0-9*?\[\]-]{1,64}$")
#: every cloud's ``secret://`` forms (the registry's ``CloudSpec.secret_refs``)
_SECRET_FORMS = tuple(f for c in CLOUDS.values() for f in c.secret_refs)
SECRET_REF_RE = re.compile("^secret://(" + "|".join(f.pattern for f in _SECRET_FORMS) + ")$")
#: each cloud's native scheme (registry order), then the public ones
DATA_SCHEMES = tuple(s for c in CLOUDS.values() for s in sorted(c.native_schemes)) + tuple(sorted(PUBLIC_SCHEMES))
_NATIVE_WORDS = ", ".join(f"{s}:// on {c.title}" for c in CLOUDS.values() for s in sorted(c.native_schemes))
URL_SAFE_RE = re.compile(r"^[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+$")

# Variables that make a shell or interpreter run code when /etc/trainvm/env is sourced.
DANGEROUS_ENV_KEYS = frozenset({
    "BASH_ENV", "ENV", "PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS3", "PS4", "SHELLOPTS", "BASHOPTS", "IFS",
    "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "PYTHONSTARTUP", "PYTHONPATH", "PERL5OPT", "NODE_OPTIONS", "PATH", "HOME",
})
MAX_ENV_VALUE = 4096
# Data may not be staged over the system or over trainvm's own files.
RESERVED_DIRS = ("/etc", "/usr", "/boot", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sys", "/dev", "/run",
                 "/var/lib", "/var/log", "/var/cache", "/opt/trainvm", "/root", "/tmp")
BUCKET_RES = {
    "gs": re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$"),
    "s3": re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"),
    "az": re.compile(r"^[a-z0-9]{3,24}$"),
}
AZ_CONTAINER_RE = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
HASH_KEY_RE = re.compile(r"(SHA|COMMIT|REVISION|_REV\b|HASH|DIGEST|CHECKSUM)", re.I)
SECRET_KEY_RE = re.compile(r"(SECRET|PASSWORD|PASSWD|TOKEN|API_?KEY|PRIVATE_?KEY|CREDENTIAL)", re.I)
SECRET_HINT = "put the secret in a secret manager and reference it as " + or_list(tuple(f.hint for f in _SECRET_FORMS))


def no_control_chars(value: str) -> str:
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("must not contain control characters (newlines, tabs, NUL)")
    return value


def check_name(value: str) -> str:
    if not NAME_RE.match(value):
        raise ValueError(f"{value!r} is not a valid name: use [a-z][a-z0-9-]{{0,40}} (it becomes part of VM names and labels)")
    if value.endswith("-"):
        raise ValueError(f"{value!r} must not end with '-'")
    return value


def check_driver(value: str) -> str:
    if not DRIVER_RE.match(value):
        raise ValueError(f"{value!r} is not an exact NVIDIA driver version (expected e.g. 550.127.05 or 570.26)")
    return value


def check_cuda(value: str) -> str:
    if not CUDA_RE.match(value):
        raise ValueError(f"{value!r} is not a CUDA major.minor version (expected e.g. 12.4)")
    return value


def check_python(value: str) -> str:
    if not PYTHON_RE.match(value):
        raise ValueError(f"{value!r} is not an exact Python version (expected X.Y.Z, e.g. 3.11.9)")
    return value


def check_cudnn(value: str) -> str:
    if not CUDNN_RE.match(value):
        raise ValueError(f"{value!r} is not a cuDNN version (expected e.g. 9.1.0 or 9.1.0.70)")
    return value


def check_gpu_name(value: str) -> str:
    facts = load_facts()
    canonical = facts.canonical_gpu(value)
    if canonical is None:
        names = facts.cloud_gpu_names()
        upper = {n.upper(): n for n in names}
        guess = value.upper().replace("O", "0").replace(" ", "-")
        close = difflib.get_close_matches(guess, list(upper), n=2, cutoff=0.6)
        hint = f"; did you mean {' or '.join(upper[c] for c in close)}?" if close else ""
        raise ValueError(f"unknown GPU {value!r}{hint} (known: {', '.join(names)})")
    if not facts.gpus[canonical].cloud:
        raise ValueError(
            f"{value} is a workstation GPU that no cloud rents; list the cloud GPUs that run the same "
            "binaries (`trainvm capture` picks them by compute capability and memory)"
        )
    return canonical


def check_package_pin(value: str) -> str:
    what = find_secret(value)
    if what:
        raise ValueError(f"the pin looks like {what}; credentials never go into a profile")
    try:
        req = Requirement(value)
    except InvalidRequirement as exc:
        raise ValueError(f"{value!r} is not a valid requirement: {exc}") from None
    if req.url:
        raise ValueError(f"{value!r}: direct URLs are not allowed; pin name==version")
    if req.marker is not None:
        raise ValueError(f"{value!r}: environment markers are not allowed in a pinned stack")
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
        raise ValueError(f"{value!r} must be pinned exactly with == (e.g. {req.name}==1.2.3); ranges drift between machines")
    try:
        Version(specs[0].version)
    except InvalidVersion:
        raise ValueError(f"{value!r}: {specs[0].version!r} is not a valid version") from None
    if not re.fullmatch(r"[A-Za-z0-9._\-\[\],=+!]+", value.replace(" ", "")):
        raise ValueError(f"{value!r} contains characters that are not allowed in a pin")
    return value


def package_name(pin: str) -> str:
    return canonicalize_name(Requirement(pin).name)


def check_packages(values: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    for pin in values:
        name = package_name(pin)
        if name in seen:
            raise ValueError(f"{name} is pinned twice ({seen[name]!r} and {pin!r})")
        seen[name] = pin
    return values


def check_abs_path(value: str) -> str:
    if not SAFE_PATH_RE.match(value) or "/../" in value + "/" or value.endswith("/..") or "//" in value:
        raise ValueError(f"{value!r} must be an absolute path of letters, digits and ._/@+- without '..'")
    if value in ("/", "/var", "/mnt", "/home", "/opt") or any(value == d or value.startswith(d + "/") for d in RESERVED_DIRS):
        raise ValueError(f"{value!r} is (inside) a system or trainvm directory; use e.g. /mnt/data/NAME")
    return value


def check_rel_path(value: str) -> str:
    if not REL_PATH_RE.match(value) or value.startswith("/") or ".." in value.split("/"):
        raise ValueError(f"{value!r} must be a relative path (to the profile) without '..'")
    return value


def check_data_source(value: str) -> str:
    parts = urlsplit(value)
    what = find_secret(value)
    if what or parts.username or parts.password:  # checked first: no later message may repeat the credential
        raise ValueError(f"{redact(value)!r} carries credentials ({what or 'a user name in the URL'}); a data URL must not "
                         f"carry them: use the VM's identity ({_NATIVE_WORDS}) or {SECRET_HINT}")
    if parts.scheme not in DATA_SCHEMES:
        raise ValueError(f"{value!r}: data source must start with one of {', '.join(s + '://' for s in DATA_SCHEMES)}")
    if not parts.netloc or not URL_SAFE_RE.match(value):
        raise ValueError(f"{value!r} is not a valid {parts.scheme}:// URL (bucket/host missing or unsafe characters)")
    bucket_re = BUCKET_RES.get(parts.scheme)
    if bucket_re is not None and not bucket_re.match(parts.netloc):
        what = "storage account" if parts.scheme == "az" else "bucket"
        raise ValueError(f"{value!r}: {parts.netloc!r} is not a valid {what} name")
    if parts.scheme == "az":
        container = parts.path.lstrip("/").split("/")[0]
        if not AZ_CONTAINER_RE.match(container):
            raise ValueError(f"{value!r}: az:// URLs are az://ACCOUNT/CONTAINER/PATH; {container!r} is not a valid container name")
    if parts.scheme in ("gs", "s3", "az") and any(c in value for c in "*?[]"):
        raise ValueError(f"{value!r}: wildcards are not supported; name a prefix (a folder) instead")
    return value


def check_secret_ref(value: str) -> str:
    if not SECRET_REF_RE.match(value):
        raise ValueError(f"{value!r} is not a secret reference ({SECRET_HINT})")
    return value


def check_region_glob(value: str) -> str:
    if not GLOB_RE.match(value):
        raise ValueError(f"{value!r} is not a region name or shell-style glob (e.g. us-central1, europe-*)")
    return value


def check_cidr(value: str) -> str:
    if "%" in value:  # an IPv6 scope id ("fe80::1%eth0") names a local interface: meaningless in a cloud firewall
        raise ValueError(f"{value!r}: IPv6 scope ids (%...) are not allowed; give a CIDR block such as 2001:db8::/64")
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a CIDR block ({exc})") from None
    if net.prefixlen == 0:
        raise ValueError(f"{value!r} would open SSH to the whole internet; give your address, e.g. 203.0.113.7/32")
    return str(net)


def looks_like_secret(key: str, value: str) -> str | None:
    """Name what ``value`` looks like when it appears to be a credential, by its format and entropy whatever
    the key (``provisioner.secrets``), or by the key's name; None otherwise."""
    if value.startswith("secret://"):
        return None
    what = find_secret(value)
    if what in (HEX40_WHAT, HEX64_WHAT) and HASH_KEY_RE.search(key):
        what = None  # GIT_SHA, MODEL_REVISION...: a commit id or digest under a key that says so
    if what:
        return what
    if SECRET_KEY_RE.search(key) and len(value) >= 8 and not value.startswith("$"):
        return f"a secret (the variable is named {key})"
    return None


def check_env(values: dict[str, str]) -> dict[str, str]:
    for key, value in values.items():
        if not ENV_KEY_RE.match(key):
            raise ValueError(f"{key!r} is not a valid environment variable name")
        if key.startswith("TRAINVM_"):
            raise ValueError(f"{key!r}: the TRAINVM_ prefix is reserved")
        if key in DANGEROUS_ENV_KEYS or key.startswith("BASH_FUNC_"):
            raise ValueError(f"{key!r} would change how shells or interpreters start on the VM; it cannot be set from a profile")
        if not value.isprintable():
            raise ValueError(f"{key}: the value must be printable text (no control, line-separator or bidi characters)")
        if len(value) > MAX_ENV_VALUE:
            raise ValueError(f"{key}: the value is longer than {MAX_ENV_VALUE} characters")
        if value.startswith("secret://") and not SECRET_REF_RE.match(value):
            raise ValueError(f"{key}: {value!r} is not a valid secret reference ({SECRET_HINT})")
        what = looks_like_secret(key, value)
        if what:
            raise ValueError(f"{key}: the value looks like {what}; secrets never go into a profile: {SECRET_HINT}")
    return values


RUN_ARG_RE = re.compile(r"^[A-Za-z0-9_./:=,+@%-]{1,256}$")
# docker run flags a profile may not pass: they undo the GPU check, the mounts or host isolation trainvm relies on.
FORBIDDEN_RUN_ARGS = ("--entrypoint", "--privileged", "--pid", "--network", "--net", "--cap-add", "--device", "--volume", "-v",
                      "--mount", "--env-file", "--rm", "--gpus", "--runtime", "--name", "--security-opt", "--userns")


def check_image_ref(value: str) -> str:
    from provisioner.container.reference import parse_image_ref  # lazy: startup

    ref = parse_image_ref(value)  # ValueError carries the message
    if not ref.tag and not ref.digest:
        raise ValueError(f"{value!r} names neither a tag nor a digest; pin it as REPO:TAG@sha256:DIGEST (`trainvm lock` resolves the tag)")
    return value


def check_run_arg(value: str) -> str:
    if not RUN_ARG_RE.match(value):
        raise ValueError(f"{value!r}: a docker run argument may contain only letters, digits and _./:=,+@%-")
    name = value.split("=", 1)[0]
    if name in FORBIDDEN_RUN_ARGS:
        raise ValueError(f"{value!r}: trainvm sets up the container itself ({', '.join(FORBIDDEN_RUN_ARGS[:6])}, ... are not allowed in run_args)")
    return value


def check_stack_kind(data: dict[str, object], has_container: bool) -> None:
    """Exactly one of stack.python (+ packages/requirements) and stack.container."""
    if "python" not in data:  # stack.python failed its own check; that error is enough
        return
    if has_container:
        if data["python"] is not None:
            raise ValueError("set exactly one of stack.container and stack.python: a container stack brings its own Python")
        for key in ("packages", "requirements"):
            if data.get(key):
                raise ValueError(f"stack.{key} cannot be combined with stack.container: the image is the stack (build a derived image instead)")
        if data.get("cuda_toolkit"):
            raise ValueError("stack.cuda_toolkit cannot be combined with stack.container: the image carries its own CUDA")
    elif data["python"] is None:
        raise ValueError("set stack.python (with stack.packages) or stack.container (an image pinned by digest)")
