"""What the AWS lifecycle's own EC2 call costs in user data (issue 10): the gzipped AWS user data of each bundled
profile with its lifecycle as written (both timers stop: the guest shutdown, no EC2 call carried), with a mixed
stop/delete (on_idle delete, on_max_run stop, max_run_hours 24 where the profile has none: the helper's
TerminateInstances, its SigV4 signer and IMDSv2 reader carried) and with every action delete (the guest shutdown
again). ``*``: over the 16,384-byte limit.

    .venv/bin/python bench/lifecycle_call_size.py [--os OS ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "render"))

import support as S  # noqa: E402

from provisioner.profile.loader import profile_hash  # noqa: E402
from provisioner.providers.registry import cloud  # noqa: E402

LIMIT = cloud("aws").user_data.limit
VARIANTS = {"as written": {}, "mixed": {"on_idle": "delete", "on_max_run": "stop"},
            "all delete": {"on_idle": "delete", "on_max_run": "delete"}}


def gz_user_data(lp, update) -> int:
    lc = lp.profile.lifecycle
    lc = lc.model_copy(update={**update, **({"max_run_hours": lc.max_run_hours or 24} if update else {})})
    prof = lp.profile.model_copy(update={"lifecycle": lc})
    r = S.render(dataclasses.replace(lp, profile=prof, hash=profile_hash(prof)), "aws", script_url="https://example.com/s.sh")
    return r.sizes.get("payload_gzip", r.sizes["user_data"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--os", nargs="*", default=["ubuntu-22.04", "debian-12"])
    args = ap.parse_args()
    print(f"{'profile':30} {'os':13} " + " ".join(f"{v:>12}" for v in VARIANTS))
    for path in S.EXAMPLES + sorted((REPO / "profiles/base").glob("*.yaml")):
        for os_name in args.os:
            lp = S.with_os(S.loaded(path), os_name)
            sizes = [gz_user_data(lp, u) for u in VARIANTS.values()]
            cells = [f"{n:,}{'*' if n > LIMIT else ' '}" for n in sizes]
            print(f"{path.parent.name + '/' + path.stem:30} {os_name:13} " + " ".join(f"{c:>12}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
