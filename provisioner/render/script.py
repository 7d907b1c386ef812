"""``render_script``: the startup script for one profile on one machine, wrapped in what the
cloud's entry point receives, with the platform size limits checked at render time.

- GCE: the ``startup-script`` metadata value is the script itself (<= 256 KiB per value).
- Azure: ``customData`` is a cloud-init document that writes the script and runs it once; it is
  base64-encoded by the API caller and must stay <= 87,380 base64 characters (64 KiB raw). The
  script is embedded as a YAML literal block, or gzip+base64 (``encoding: gz+b64``) when needed.
- AWS: user data is <= 16,384 bytes raw. The script itself when it fits, else the gzipped script
  (cloud-init decompresses gzip user data); when even that does not fit, embedded files the script needs
  only after it started are spilled into instance tags (render/spill.py, ``RenderedScript.spilled``) until it
  fits; else a small bootstrap that downloads the script from ``script_url`` and checks its sha256.
Past a limit: ``RenderError`` naming the sizes.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provisioner.errors import RenderError
from provisioner.providers.lifecycle import api_actions
from provisioner.providers.registry import CLOUDS, UserDataEncoding
from provisioner.render.compact import compact_shell
from provisioner.render.context import RenderTarget, ScriptContext, build_context
from provisioner.render.shell import template_env
from provisioner.render.spill import SpilledFile, combined_sha256, spill_to_fit

SCRIPT_PATH = "/usr/local/sbin/trainvm-provision"


@dataclass(frozen=True)
class RenderedScript:
    cloud: str
    startup_sh: str  # the script as it runs on the VM (render --out: startup.sh)
    # Exactly what the cloud receives before any base64 (render --out: user-data). bytes only for
    # AWS gzip user data (entry "aws-gzip"); text otherwise.
    user_data: str | bytes
    # How the create request carries user_data: "plain" (GCE metadata value, as is) or
    # "base64" (Azure customData and the raw EC2 API; boto3's run_instances encodes it itself).
    user_data_encoding: UserDataEncoding
    sizes: dict[str, int] = field(default_factory=dict)
    script_sha256: str = ""
    entry: str = ""  # gce-startup-script | azure-cloud-init[-gzip] | aws-script | aws-gzip | aws-bootstrap
    #: heredocs carried in instance tags instead of the script (render/spill.py); the create request adds
    #: ``spill_tags()`` to the instance's tags
    spilled: tuple[SpilledFile, ...] = ()

    def spill_tags(self) -> tuple[tuple[str, str], ...]:
        return tuple(t for f in self.spilled for t in f.tags)

    def request_value(self) -> str:
        """The string that goes into the create request's field (base64 where the API wants it)."""
        data = self.user_data.encode("utf-8") if isinstance(self.user_data, str) else self.user_data
        if self.user_data_encoding == "base64":
            return base64.b64encode(data).decode("ascii")
        return data.decode("utf-8")


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def _b64_lines(data: bytes) -> str:
    return "\n".join(textwrap.wrap(base64.b64encode(data).decode("ascii"), 76))


# The script in three parts, rendered separately so that compaction knows by position, not by a
# marker searched for in the text, where the configuration block (every profile value) is.
_PARTS = ("_head.sh.j2", "_config.sh.j2", "_body.sh.j2")


def _render_parts(ctx: ScriptContext, spill: tuple[SpilledFile, ...] = ()) -> tuple[str, str, str]:
    env = template_env()
    sha = combined_sha256(spill) if spill else ""
    head, config, body = (env.get_template(name).render(ctx=ctx, spill=spill, spill_sha256=sha) for name in _PARTS)
    try:
        (head + config + body).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RenderError(f"the script would contain a character that is not valid UTF-8 text ({exc.reason})") from None
    return head, config, body


def _render_startup(ctx: ScriptContext) -> str:
    return "".join(_render_parts(ctx))


def compact_script(head: str, config: str, body: str, keep: frozenset[str] | None = None) -> str:
    """The script with ``head`` and ``body`` compacted (comments, blank lines, indentation,
    embedded Python minified, without the helper's ``secret_*`` readers not in ``keep``) and the
    configuration block kept byte for byte."""
    return compact_shell(head) + "\n" + config + compact_shell(body, keep)


def python_keep(ctx: ScriptContext) -> frozenset[str]:
    """The run-time-dispatched functions of the embedded Python this profile needs (compact.py
    DYNAMIC_PREFIXES): the helper's ``secret_KIND`` for each kind of ``secret://KIND/...`` reference in
    stack.env and in the data credentials, its ``cred_*`` credential code when there are data credentials,
    its ``api_CLOUD`` (trainvm-lifecycle's own call of the cloud's API, where the helper has one) when an action
    of the idle watchdog or the max-run timer is one that a shutdown from inside the guest does not do (AWS: a
    mixed stop/delete; a guest shutdown does the other action exactly, at no cost in user data) unless the
    profile installs the copy tool whose SDK trainvm-lifecycle calls instead (``LifecycleFacts.api_sdk_scheme``), and the
    copier's ``scheme_SCHEME`` for each copy tool."""
    env = json.loads(ctx.expected_json).get("env", {})
    refs = [v for v in env.values() if isinstance(v, str) and v.startswith("secret://")]
    creds = [d.credential for d in ctx.data if d.credential and d.tool] if ctx.datatools else []
    kinds = {v[len("secret://"):].split("/", 1)[0] for v in refs + creds}
    keep = {"secret_" + k.replace("-", "_") for k in kinds} | {"scheme_" + t.scheme for t in ctx.datatools}
    used = [a for a, on in ((ctx.on_idle, ctx.idle_minutes), (ctx.on_max_run, ctx.max_run_seconds)) if on]
    sdk = CLOUDS[ctx.cloud].lifecycle.api_sdk_scheme  # that copy tool's SDK makes the call instead (registry)
    if api_actions(used, ctx.shutdown_does) and not any(t.scheme == sdk for t in ctx.datatools):
        keep.add("api_" + ctx.cloud)
    return frozenset(keep | ({"cred_file", "cred_hidden"} if creds else set()))


Wrapped = tuple[str | bytes, str, dict[str, int]]  # (user data, entry, extra sizes)


def _gce(script: str, ctx: ScriptContext, script_url: str | None, limit: int) -> Wrapped:
    raw_len = len(script.encode("utf-8"))
    if raw_len > limit:
        raise RenderError(
            f"the startup script is {raw_len:,} bytes; a GCE metadata value holds at most {limit:,}. "
            "Shorten the profile's lock file or package list."
        )
    return script, "gce-startup-script", {}


def _azure(script: str, ctx: ScriptContext, script_url: str | None, limit: int) -> Wrapped:
    from ruamel.yaml import YAML

    env = template_env()
    tmpl = env.get_template("entry/azure-cloud-init.yaml.j2")
    plain = tmpl.render(ctx=ctx, script=script, encoding="", path=SCRIPT_PATH)
    # A literal block only for printable ASCII: cloud-init's YAML 1.1 parser treats U+0085,
    # U+2028 and U+2029 as line breaks and rejects other non-printable characters.
    ok = all(c in "\t\n" or " " <= c <= "~" for c in script)
    if ok:
        try:
            ok = YAML(typ="safe").load(plain)["write_files"][0]["content"] == script
        except Exception:
            ok = False
    b64_len = len(base64.b64encode(plain.encode("utf-8")))
    if ok and b64_len <= limit:
        return plain, "azure-cloud-init", {"custom_data_base64": b64_len}
    packed = _b64_lines(_gzip(script.encode("utf-8")))
    doc_text = tmpl.render(ctx=ctx, script=packed, encoding="gz+b64", path=SCRIPT_PATH)
    b64_len_gz = len(base64.b64encode(doc_text.encode("utf-8")))
    if b64_len_gz > limit:
        raise RenderError(
            f"Azure customData would be {b64_len_gz:,} base64 characters even with gzip (limit {limit:,}); "
            f"the startup script is {len(script.encode()):,} bytes. Shorten the profile's lock file or package list."
        )
    return doc_text, "azure-cloud-init-gzip", {"custom_data_base64": b64_len_gz, "custom_data_plain_base64": b64_len}


def _aws(script: str, ctx: ScriptContext, script_url: str | None, limit: int) -> Wrapped:
    raw = script.encode("utf-8")
    if len(raw) <= limit:
        return script, "aws-script", {}
    # cloud-init decompresses gzip user data itself ("typically useful because user-data is
    # limited to ~16384 bytes"), so gzip costs no bootstrap and no base64 inflation.
    packed = _gzip(raw)
    if len(packed) <= limit:
        return packed, "aws-gzip", {"payload_gzip": len(packed)}
    if script_url:
        boot = template_env().get_template("entry/aws-bootstrap.sh.j2").render(
            ctx=ctx, script_url=script_url, script_sha256=hashlib.sha256(raw).hexdigest()
        )
        return boot, "aws-bootstrap", {"payload_gzip": len(packed)}
    raise RenderError(
        f"AWS user data would be {len(packed):,} bytes even gzipped (limit {limit:,} raw; the startup script is "
        f"{len(raw):,} bytes). Shorten the profile's lock file or package list, or host the script and render with script_url "
        "(the bootstrap downloads it and checks its sha256)."
    )


#: user-data kind (providers/registry.py ``UserDataFormat.kind``) -> how the script is wrapped in it
_WRAP: dict[str, Callable[[str, ScriptContext, str | None, int], Wrapped]] = {
    "gce-metadata": _gce, "azure-custom-data": _azure, "ec2-user-data": _aws,
}


def _maker(ctx: ScriptContext, compacted: bool) -> Callable[..., str]:
    """The script of ``ctx`` with the fetch of the given spilled files (their heredocs still in it)."""
    keep = python_keep(ctx)

    def make(spill: tuple[SpilledFile, ...] = ()) -> str:
        parts = _render_parts(ctx, spill)
        return compact_script(*parts, keep=keep) if compacted else "".join(parts)

    return make


def fully_spilled(loaded: Any, target: RenderTarget) -> tuple[int, int]:
    """(gzipped bytes, tags) of the compacted script with every spillable heredoc spilled: the most room spilling
    can make (tests/render/test_compact.py keeps a reserve under the limit; bench/user_data_sizes.py shows it)."""
    from provisioner.render.spill import heredocs, replace_heredocs, spilled_file

    make = _maker(build_context(loaded, target), True)
    files = tuple(spilled_file(n, i, c) for i, (n, c) in enumerate(heredocs(make()).items()))
    script = replace_heredocs(make(files), files)
    return len(_gzip(script.encode("utf-8"))), sum(f.chunks for f in files)


def render_script(loaded: Any, target: RenderTarget, *, script_url: str | None = None, facts: Any = None,
                  compact: bool | None = None, spill: bool = True) -> RenderedScript:
    """Render the startup script of ``loaded`` (a LoadedProfile) for ``target``.

    ``script_url`` (AWS only): an https URL (e.g. a presigned S3 URL) where the caller will host
    ``startup_sh`` when even the gzipped script exceeds 16 KB; user data is then a bootstrap that
    downloads it and checks its sha256. ``compact`` drops comments and blank lines from the
    script; by default only where the full script would not fit (AWS). ``spill=False``: never move embedded
    files into instance tags (render/spill.py), for a script run where no instance carries them (the real-OS
    lane runs ``startup_sh`` itself)."""
    ctx = build_context(loaded, target, facts)
    fmt = CLOUDS[target.cloud].user_data
    make = _maker(ctx, compact if compact is not None else fmt.compact)
    script = make()
    spilled: tuple[SpilledFile, ...] = ()
    if spill and fmt.spill_tags and len(_gzip(script.encode("utf-8"))) > fmt.limit:
        script, spilled = spill_to_fit(script, make, lambda s: len(_gzip(s.encode("utf-8"))) <= fmt.limit, fmt.spill_tags)
    sizes: dict[str, int] = {"startup_sh": len(script.encode("utf-8"))}
    if spilled:
        sizes["spill_tags"] = sum(len(f.tags) for f in spilled)
    try:
        user_data, entry, extra = _WRAP[fmt.kind](script, ctx, script_url, fmt.limit)
    except RenderError as exc:
        if not (spill and fmt.spill_tags):
            raise
        raise RenderError(f"{exc} Moving every embedded file that can move into instance tags (at most "
                          f"{fmt.spill_tags}) does not make it fit either.") from None
    sizes.update(extra)
    sizes["user_data"] = len(user_data.encode("utf-8") if isinstance(user_data, str) else user_data)
    sizes["limit"] = fmt.limit
    return RenderedScript(
        cloud=target.cloud,
        startup_sh=script,
        user_data=user_data,
        user_data_encoding=fmt.encoding,
        sizes=sizes,
        script_sha256=hashlib.sha256(script.encode("utf-8")).hexdigest(),
        entry=entry,
        spilled=spilled,
    )
