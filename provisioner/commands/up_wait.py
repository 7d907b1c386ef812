"""``up --wait-ready``: follow the startup script phase by phase until it reports, then verify the VM
(split from commands/up.py, issue 37: no module over 400 lines)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from provisioner.commands.verify import exit_code, print_verify
from provisioner.errors import CloudError, NotReadyError
from provisioner.output import emit_json, styled
from provisioner.providers.poll import poll as poll_until  # as in commands/up.py
from provisioner.providers.registry import cloud as cloud_spec
from provisioner.provision.progress import Progress
from provisioner.verify.cluster import compare_cluster
from provisioner.verify.compare import compare
from provisioner.verify.console import ConsoleFollower

if TYPE_CHECKING:
    from provisioner.providers.base import InstanceRecord, Provider
    from provisioner.providers.stack_report import StackReport


#: One look at the VM: (its report, the profile stored on it, whether the startup script has finished).
Look = tuple["StackReport | None", "dict[str, object] | None", bool]


class _GaveUp(Exception):
    """``wait_ready``'s deadline passed: carries the last look (a report still running, or none)."""

    def __init__(self, last: Look) -> None:
        super().__init__("gave up waiting")
        self.last = last

    @classmethod
    def after(cls, last: Look | BaseException) -> BaseException:
        return last if isinstance(last, BaseException) else cls(last)  # an error from the last look propagates


def wait_ready(provider: Provider, record: InstanceRecord, timeout: float, json_out: bool, up_doc: dict[str, object], interval: float) -> int:
    """Follow the startup script until it reports ready or failed: each phase as it starts and ends
    (from the console's TRAINVM_STATUS and log lines, and the live status where the registry has one: GCE guest
    attributes), then verify. A timeout says which phase it was in."""
    follower = ConsoleFollower()
    live_status = cloud_spec(record.cloud).live_status is not None
    seen: set[str] = set()  # phases shown, from either source
    live_phase = None
    t0 = time.monotonic()
    with Progress(enabled=not json_out) as progress:
        progress.start("waiting for the startup script")

        def step() -> Look:
            """One look: the console's new lines and the live status shown as phases, then the report (and
            whether the script has finished: every node's, for a cluster)."""
            nonlocal live_phase
            chunk = provider.console(record.name, follower.offset)
            for ev in follower.feed(*chunk) if chunk else []:
                if (ev.kind == "start" or (ev.kind == "status" and ev.value and ev.value.startswith("running:"))) \
                        and progress.current != f"phase {ev.phase}":  # not twice when the guest attribute showed it
                    seen.add(ev.phase or "")
                    progress.start(f"phase {ev.phase}")
                elif ev.kind == "end" and progress.current == f"phase {ev.phase}":
                    progress.end(ev.value or "", "red" if ev.value == "failed" else "green")
                elif ev.kind == "status" and ev.value and not ev.value.startswith("running:"):
                    style = {"ready": "green", "rehearsed": "yellow"}.get(ev.value, "red")
                    if progress.current:
                        progress.end(ev.value, style)
                    progress.line(styled("startup script: ", (ev.value, style)))
            status = provider.live_status(record) if live_status else None
            if status and status.startswith("running:") and status.split(":")[1] not in seen:
                live_phase = status.split(":")[1]  # the console has not shown this phase (yet)
                seen.add(live_phase)
                progress.start(f"phase {live_phase}")
            report, profile = provider.read_report(record.name)
            if record.cluster:  # every node's report (rank 0's console is the one followed)
                reports = provider.read_cluster_reports(record.cluster)
                return report, profile, len(reports) >= record.nodes and all(
                    r is not None and r.state != "running" for r in reports.values())
            return report, profile, report is not None and report.state != "running"

        try:  # until the script has finished; past the deadline, the last look is judged (as "provisioning")
            report, profile, _ = poll_until(step, ready=lambda look: look[2], deadline=t0 + timeout, interval=interval,
                                      timed_out=_GaveUp.after)
        except _GaveUp as gave_up:
            report, profile, _ = gave_up.last
        if profile is None:
            raise CloudError(f"the profile stored on {record.name} could not be read, so there is nothing to verify against",
                             hint=f"trainvm verify {record.name} --profile PROFILE.yaml")
        if record.cluster:
            result = compare_cluster(profile, provider.read_cluster_reports(record.cluster), record.nodes)
        else:
            result = compare(profile, report)
        timed_out = result.status == "provisioning"
        phase = result.phase or follower.phase or live_phase
        if timed_out:
            progress.end("timed out", "red")
    if json_out:
        emit_json({**up_doc, "verify": result.as_dict(record.cluster or record.name), "status": result.status,
                   "timed_out": timed_out, "waited_seconds": round(time.monotonic() - t0, 1)})
        return exit_code(result)
    rc = print_verify(record.cluster or record.name, result, json_out)
    if timed_out:
        where = f"in phase {phase}" if phase else "before the startup script reported anything"
        raise NotReadyError(f"{record.name}: gave up waiting after {timeout:g} s, {where}; the VM is still running (and billing)",
                            hint=f"`trainvm logs {record.name} --follow` shows the provisioning log; `trainvm verify {record.name}` checks again")
    return rc
