"""Startup-script sizes per bundled profile and cloud, against each cloud's user-data limit, and
where the AWS bytes go (per section of the compacted script, as the gzip bytes the section adds).

    .venv/bin/python bench/user_data_sizes.py [--sections PROFILE] [--os OS] [--native-data]

AWS takes at most 16,384 bytes of user data (the gzipped, compacted script); tests/render/
test_compact.py asserts the headroom that every bundled profile must leave. The bundled examples read
gs:// without a credential, so on AWS (and Azure) their script carries no copy tool and stops at preflight
(docs/data-tools.md); the last column, ``aws s3 data``, is the same profile with its data on S3 (what an AWS
user writes: the s3 copy tool's lock and copier included), gzipped, with ``*`` where it exceeds the limit
(user data is then the script_url bootstrap) and the number of instance tags its spilled embedded files take
(render/spill.py; ``-`` when nothing is spilled); ``s3 reserve`` is the room left with every spillable file spilled
(tests/render/test_compact.py keeps a floor under it). ``--native-data`` makes ``--sections`` use that variant."""

from __future__ import annotations

import argparse
import gzip
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "render"))

import support as S  # noqa: E402

from provisioner.providers.registry import cloud  # noqa: E402
from provisioner.render.script import fully_spilled  # noqa: E402

GCE_VALUE_LIMIT, AZURE_CUSTOM_DATA_LIMIT, AWS_USER_DATA_LIMIT = (cloud(c).user_data.limit for c in ("gcp", "azure", "aws"))

LIMITS = {"gcp": ("startup_sh", GCE_VALUE_LIMIT), "azure": ("custom_data_base64", AZURE_CUSTOM_DATA_LIMIT),
          "aws": ("user_data", AWS_USER_DATA_LIMIT)}
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(TRAINVM_[A-Z_]+)\1")


def _gz(text: str) -> int:
    return len(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))


def sections(script: str) -> list[tuple[int, int, str]]:
    """(gzip bytes the section adds, raw bytes, name) per top-level function, heredoc and
    configuration variable of ``script``."""
    lines, spans, name, start, delim = script.split("\n"), [], "head", 0, None
    for i, line in enumerate(lines):
        if delim:
            if line == delim:
                spans.append((f"<<{delim}", start, i + 1))
                delim, start, name = None, i + 1, f"after {delim}"
            continue
        m = _HEREDOC.search(line)
        if m:
            spans.append((name, start, i + 1))
            delim, start = m.group(2), i + 1
            continue
        f = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\(\) \{|^(TV_[A-Z0-9_]+)=", line)
        if f and i > start:
            spans.append((name, start, i))
            name, start = f.group(1) or f.group(2), i
        elif f:
            name = f.group(1) or f.group(2)
    spans.append((name, start, len(lines)))
    full = _gz(script)
    out: dict[str, list[int]] = {}
    for nm, a, b in spans:
        cost = full - _gz("\n".join(lines[:a] + lines[b:]))
        acc = out.setdefault(nm, [0, 0])
        acc[0] += cost
        acc[1] += len("\n".join(lines[a:b]).encode())
    return sorted(((g, r, n) for n, (g, r) in out.items()), reverse=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", metavar="PROFILE", help="per-section AWS bytes of one profile (path or example name)")
    ap.add_argument("--os", default=None, help="render for this OS instead of the profile's")
    ap.add_argument("--native-data", action="store_true", help="--sections: the profile with its data on S3")
    args = ap.parse_args()
    profiles = S.EXAMPLES + sorted((REPO / "profiles/base").glob("*.yaml"))
    if args.sections:
        path = Path(args.sections)
        path = path if path.exists() else REPO / "profiles/examples" / f"{args.sections}.yaml"
        lp = S.loaded(path)
        lp = S.with_os(lp, args.os) if args.os else lp
        lp = S.data_native_to(lp, "aws") if args.native_data else lp
        script = S.render(lp, "aws", script_url=S.SCRIPT_URL).startup_sh
        print(f"{path.stem} on AWS: {_gz(script):,} bytes gzipped, {len(script.encode()):,} raw")
        for g, r, n in sections(script)[:40]:
            print(f"{g:7,} {r:8,}  {n}")
        return 0
    print(f"{'profile':28} {'os':13} {'gcp script':>11} {'azure b64':>10} {'aws gzip':>9} {'aws headroom':>13} "
          f"{'aws s3 data':>12} {'tags':>4} {'s3 reserve':>10}")
    for path in profiles:
        lp = S.loaded(path)
        for os_name in [args.os] if args.os else S.OS_NAMES:
            lpo = S.with_os(lp, os_name)
            sizes = {c: S.render(lpo, c).sizes for c in S.CLOUDS}
            aws = sizes["aws"]["user_data"]
            lpn = S.data_native_to(lpo, "aws")
            native = S.render(lpn, "aws", script_url=S.SCRIPT_URL)
            s3 = native.sizes.get("payload_gzip", native.sizes["user_data"])
            least, _ = fully_spilled(lpn, S.target_for("aws", lpn))
            print(f"{path.parent.name + '/' + path.stem:28} {os_name:13} {sizes['gcp']['startup_sh']:>11,} "
                  f"{sizes['azure']['custom_data_base64']:>10,} {aws:>9,} {AWS_USER_DATA_LIMIT - aws:>13,} "
                  f"{s3:>11,}{'*' if s3 > AWS_USER_DATA_LIMIT else ' '} {native.sizes.get('spill_tags', '-'):>4} "
                  f"{AWS_USER_DATA_LIMIT - least:>10,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
