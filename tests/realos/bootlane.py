"""The bootstrap in `make test-os`: what both scenarios share from the user data to the agent's report (lane.py).

Each scenario renders its profile (``render_script``), makes the lane's one edit to the script (TV_KEYRING_SHA256 is
the fake keyring's) and packs the edited script into its payload again with ``build_payload`` and the manifest's own
metadata (``repack``), stages that payload in a local object store with the cloud's own store class, renders the
bootstrap for the staged ``PayloadRef`` (``RenderedScript.user_data``) and runs it in the chroot as user data runs:
root, ``bash /root/user-data``, with ``TRAINVM_METADATA_URL`` pointing the cloud's fetch at a loopback metadata stub.

Pure parts (``repack``, ``installed_traces``, ``bootstrap_says``, ``report_differences``) are tested without root in
test_lane_parts.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from runner import check, final_status, log, run_script

USER_DATA = "user-data"  # /root/user-data in the chroot: the bootstrap as the cloud hands it over
# fail fast instead of the bootstrap's 20 minutes of retries if the fetch were refused (the lane's own fault)
FETCH_ENV = ("TRAINVM_FETCH_SECONDS=60", "TRAINVM_MISSING_TRIES=3")
# report fields that differ between the VM's report and a probe by nature: who wrote it, the startup script's
# phases (with timings), its profile hash and error, the perf probe; and the free space of the data disk (the
# same disk, measured at another moment)
BY_NATURE = ("source", "phases", "profile_hash", "error", "perf", "container", "disk.free_gib")


def edit_keyring(script: str, keyring_sha: str) -> str:
    """The lane's one edit: the cuda-keyring the script accepts is the fake repository's."""
    script, n = re.subn(r"^TV_KEYRING_SHA256=\S+$", f"TV_KEYRING_SHA256={keyring_sha}", script, flags=re.M)
    assert n == 1, "TV_KEYRING_SHA256 is not one line of the rendered script"
    return script


def repack(rendered: Any, keyring_sha: str) -> Any:
    """``rendered`` (a RenderedScript) with the edited script in a payload built again the way ``render_script``
    builds it (``build_payload`` with the manifest's metadata), so that its sha256 is the edited payload's."""
    from provisioner.render.payload import build_payload

    script = edit_keyring(rendered.startup_sh, keyring_sha)
    doc = json.loads(rendered.payload.files["manifest.json"])
    meta = {k: v for k, v in doc.items() if k not in ("schema", "files")}
    return replace(rendered, startup_sh=script, payload=build_payload(script, meta))


def write_user_data(root: Path, text: str) -> None:
    path = root / "root" / USER_DATA
    path.write_text(text)
    path.chmod(0o700)


def bootstrap_says(out: str) -> list[str]:
    """The bootstrap's own lines (``trainvm bootstrap: ...``) of a run's output."""
    return re.findall(r"^trainvm bootstrap: (.*)$", out, re.M)


def fetched_and_verified(out: str, sha: str) -> bool:
    return any(re.fullmatch(rf"payload {sha} fetched \(\d+ bytes\) and verified", line) for line in bootstrap_says(out))


def nothing_fetched(out: str, sha: str) -> bool:
    return f"payload {sha} already on disk: nothing fetched" in bootstrap_says(out)


def installed_traces(root: Path) -> list[str]:
    """What a bootstrap or the script would leave in ``root`` once it ran anything: the payload unpacked, the
    current link, the installed script, a cached archive, the script's state. [] on a machine it never ran on
    (the bootstrap's empty 0700 cache folder is allowed: it is made before the fetch)."""
    out = [p for p in ("opt/trainvm/payload", "opt/trainvm/current", "usr/local/sbin/trainvm-provision",
                       "etc/systemd/system/trainvm-provision.service")
           if (root / p).exists() or (root / p).is_symlink()]
    cache = root / "var/lib/trainvm/payload"
    out += [str(p.relative_to(root)) for p in sorted(cache.iterdir())] if cache.is_dir() else []
    state = root / "var/lib/trainvm"
    out += [str(p.relative_to(root)) for p in sorted(state.iterdir()) if p.name != "payload"] if state.is_dir() else []
    return out


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(doc, dict) and doc:
        out: dict[str, Any] = {}
        for k, v in doc.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: doc}


def report_differences(vm: dict[str, Any], local: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Field by field (nested objects flattened to ``a.b``): (compared and equal, differing by nature, differing
    otherwise: the failures). A field one side lacks counts as differing unless it is one of ``BY_NATURE``."""
    a, b = _flatten(vm), _flatten(local)
    same: list[str] = []
    nature: list[str] = []
    wrong: list[str] = []
    for key in sorted(set(a) | set(b)):
        if any(key == n or key.startswith(n + ".") for n in BY_NATURE):
            (same if a.get(key) == b.get(key) else nature).append(key)
        elif key in a and key in b and a[key] == b[key]:
            same.append(key)
        else:
            wrong.append(f"{key}: vm {a.get(key, '<absent>')!r}, probe {b.get(key, '<absent>')!r}")
    return same, nature, wrong


# probe() as `trainvm verify --local --python /opt/trainvm/venv/bin/python` runs it (source "local"), on the VM's
# own python3 from the payload's agent, with the data disk and data destinations of the VM's expectation (what the
# VM's `agent report` passes, so that disk and data are compared too)
PROBE = """import json, sys
from provisioner.agent.report import probe
exp = json.load(open("/var/lib/trainvm/expected.json"))
doc = probe(python="/opt/trainvm/venv/bin/python", data_path=exp.get("disk_path") or "/",
            data_dests=[d["dest"] for d in exp.get("data") or []], source="local")
json.dump(doc, sys.stdout, sort_keys=True)
"""


def probe_in_root(root: Path, base_env: tuple[str, ...]) -> dict[str, Any]:
    """The agent's probe() run on the same machine after the VM reported (chroot, the VM's PATH and stubs)."""
    proc = subprocess.run(["chroot", str(root), "env", "-i", *base_env, "PYTHONPATH=/opt/trainvm/current/agent",
                           "python3", "-s", "-c", PROBE], capture_output=True, text=True,
                          timeout=300, cwd="/")
    if proc.returncode != 0:
        raise SystemExit(f"test-os FAILED: the agent's probe in the chroot exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout)


def compare_reports(root: Path, out: str, base_env: tuple[str, ...], profile_path: Path, label: str) -> None:
    """The VM's report (its last TRAINVM_REPORT line) against probe() run on the same root, field by field, and
    `verify`'s judgement (provisioner.verify.compare, what `trainvm verify` prints) of both against the profile."""
    from provisioner.profile import load_profile
    from provisioner.verify.compare import compare
    from provisioner.verify.report import StackReport, last_console_report

    report = last_console_report(out)
    check(report is not None, f"{label}: the VM printed a TRAINVM_REPORT that verify decodes", out)
    assert report is not None
    vm = report.model_dump(mode="json", by_alias=True, exclude_none=False)
    local = StackReport.model_validate(probe_in_root(root, base_env)).model_dump(mode="json", by_alias=True, exclude_none=False)
    same, nature, wrong = report_differences(vm, local)
    check(not wrong and vm["status"] == "ready",
          f"{label}: the VM's report equals the agent's probe of the same machine in {len(same)} fields "
          f"(differing by nature: {', '.join(nature) or 'none'})", "\n".join(wrong))
    loaded = load_profile(profile_path, compat=False)
    profile = loaded.profile.model_dump(mode="json")
    if loaded.lock is not None:
        profile["lock"] = {"packages": loaded.lock.versions()}
    v_vm, v_local = compare(profile, vm), compare(profile, local)
    rows_vm = [f.as_dict() for f in v_vm.fields]
    rows_local = [f.as_dict() for f in v_local.fields]
    check(rows_vm == rows_local, f"{label}: verify judges both the same, field by field ({v_vm.status}: "
          f"{len(rows_vm)} fields; drifted: {', '.join(f.field for f in v_vm.drifted) or 'none'})",
          json.dumps({"vm": rows_vm, "probe": rows_local}, indent=1, default=str))
    log(f"{label}: report fields compared equal: {', '.join(same)}")


def _dpkg_size(root: Path) -> int:
    log_file = root / "var/log/dpkg.log"
    return log_file.stat().st_size if log_file.exists() else 0


def refuses_tampered(root: Path, work: Path, env: tuple[str, ...], sha: str, label: str) -> None:
    """The bootstrap, the stored object replaced by other bytes: failed:bootstrap with a report, nothing run."""
    from provisioner.verify.report import last_console_report

    before = _dpkg_size(root)
    rc, out, took = run_script(root, USER_DATA, env)
    (work / "run0-tampered.log").write_text(out)
    report = last_console_report(out)
    status = final_status(out)
    check(rc == 1 and status.startswith("failed:bootstrap:") and report is not None and report.status == status
          and "payload hash mismatch" in (report.error or "") and sha in (report.error or ""),
          f"{label}: a tampered object is refused ({status}, 'payload hash mismatch' in the report, {took:.0f} s)", out)
    traces = installed_traces(root)
    check(not traces and _dpkg_size(root) == before, f"{label}: the refused payload installed and ran nothing",
          f"{traces}\n{out}")


def fetched(root: Path, out: str, rendered: Any, label: str) -> None:
    """After the first boot: the payload fetched and verified, unpacked, current pointing at it, its script installed."""
    sha = rendered.payload.sha256
    check(fetched_and_verified(out, sha), f"{label}: the bootstrap fetched payload {sha[:12]} and verified its sha256",
          "\n".join(bootstrap_says(out)) or out)
    current = root / "opt/trainvm/current"
    check(current.is_symlink() and os.readlink(current) == f"/opt/trainvm/payload/{sha}"
          and (root / f"opt/trainvm/payload/{sha}/.complete").exists(),
          f"{label}: /opt/trainvm/current -> /opt/trainvm/payload/{sha[:12]}...", str(current))
    installed = root / "usr/local/sbin/trainvm-provision"
    cached = root / f"var/lib/trainvm/payload/{sha}.tar.gz"
    check(installed.read_text() == rendered.startup_sh and cached.read_bytes() == rendered.payload.data,
          f"{label}: /usr/local/sbin/trainvm-provision is the payload's startup.sh; the verified archive is kept")


def rerun(root: Path, work: Path, env: tuple[str, ...], rendered: Any, name: str) -> tuple[int, str, float]:
    """The bootstrap again after the store was emptied: it must use the verified copy (nothing fetched) and its
    script must install nothing (dpkg.log unchanged)."""
    before = _dpkg_size(root)
    rc, out, took = run_script(root, USER_DATA, env)
    (work / f"{name}.log").write_text(out)
    check(nothing_fetched(out, rendered.payload.sha256) and _dpkg_size(root) == before,
          f"the bootstrap again: 'already on disk: nothing fetched', dpkg.log unchanged ({took:.0f} s)", out)
    return rc, out, took


class Recorder(BaseHTTPRequestHandler):
    """A loopback HTTP server's handler that records (method, path, user agent) and answers from ``route``."""

    server: Any

    def log_message(self, *args: object) -> None:
        pass

    def _serve(self) -> None:
        self.server.seen.append((self.command, self.path, self.headers.get("User-Agent", "")))
        status, body = self.server.route(self)
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = _serve  # noqa: N815 - http.server's names


class Stub(ThreadingHTTPServer):
    """A loopback metadata stub: ``route(handler) -> (status, body)``; what it was asked in ``seen``."""

    daemon_threads = True

    def __init__(self, route: Callable[[BaseHTTPRequestHandler], tuple[int, str]], port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), Recorder)
        self.route = route
        self.seen: list[tuple[str, str, str]] = []  # (method, path, user agent)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


def serve(route: Callable[[BaseHTTPRequestHandler], tuple[int, str]], port: int = 0) -> Stub:
    """The stub on 127.0.0.1:``port`` (0: a free port; the VM lane, tests/vm/bootlane.py, needs GCE's port 80)."""
    httpd = Stub(route, port)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


IMDS_TOKEN = "AQAEAtest-os-imdsv2-token=="


def imdsv2(role: str, credentials: dict[str, str]):
    """EC2's IMDSv2 as fetch-aws.sh and boto3 use it: a token for a PUT with a TTL header, required on every GET
    (401 without), the instance profile's role name and its temporary credentials; 404 elsewhere."""
    base = "/latest/meta-data/iam/security-credentials/"

    def route(h: BaseHTTPRequestHandler) -> tuple[int, str]:
        if h.command == "PUT":
            ok = h.path == "/latest/api/token" and h.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            return (200, IMDS_TOKEN) if ok else (400, "")
        if h.headers.get("X-aws-ec2-metadata-token") != IMDS_TOKEN:
            return 401, ""
        if h.path == base:
            return 200, role
        if h.path == base + role:
            return 200, json.dumps(credentials, indent=2)
        return 404, ""

    return route


GCE_TOKEN = "ya29.test-os-" + "x" * 40


def gce_metadata(h: BaseHTTPRequestHandler) -> tuple[int, str]:
    """GCE's metadata server as fetch-gcp.sh uses it: the default service account's token, only with
    ``Metadata-Flavor: Google`` (403 without, as GCE answers); 404 elsewhere."""
    if h.headers.get("Metadata-Flavor") != "Google":
        return 403, "Missing required header: Metadata-Flavor"
    if h.path == "/computeMetadata/v1/instance/service-accounts/default/token":
        return 200, json.dumps({"access_token": GCE_TOKEN, "expires_in": 3599, "token_type": "Bearer"})
    return 404, "Not Found"
