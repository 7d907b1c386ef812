"""Long-running operations of the ARM emulator: Op (polled through Azure-AsyncOperation / Location or the
resource body) and the part of arm_state.State that creates and finishes them."""
from __future__ import annotations

import uuid

from .arm_catalog import now
from .arm_validate import ArmError


class Op:
    """A long-running operation, polled through Azure-AsyncOperation / Location or the resource body."""

    def __init__(self, ns, location, polls, finish, never=False, fail=None):
        self.id, self.ns, self.location = str(uuid.uuid4()), ns, location
        self.polls, self.finish, self.never, self.fail = polls, finish, never, fail
        self.status, self.error, self.result, self.start, self.end = "InProgress", None, None, now(), None

    def advance(self):
        if self.status != "InProgress" or self.never:
            return
        if self.polls > 0:
            self.polls -= 1
            return
        try:
            self.result = self.finish(self.fail)
            self.status = "Failed" if self.fail else "Succeeded"
            self.error = self.fail
        except ArmError as e:  # e.g. the resource vanished (its group was deleted) while the LRO ran
            self.status, self.error = "Canceled", {"code": e.code, "message": e.message}
        self.end = now()

    def status_body(self):
        body = {"startTime": self.start, "status": self.status, "name": self.id}
        if self.end:
            body["endTime"] = self.end
        if self.error:
            body["error"] = self.error
        if self.status == "Succeeded" and self.result is not None:
            body["properties"] = {"output": self.result}
        return body


class LroMixin:
    """Creating and finishing LROs; mixed into arm_state.State (runs under ArmEmulator's lock)."""

    # ------------------------------------------------------------------ LROs
    def new_op(self, ns, location, polls, finish, never=False, fail=None):
        op = Op(ns, location, polls, finish, never, fail)
        self.ops[op.id] = op
        return op

    def _finisher(self, rec, on_success=None):
        def finish(fail):
            if self.by_id(rec["id"]) is not rec:
                raise ArmError(409, "OperationPreempted", "Operation execution has been preempted by a more "
                               "recent operation.")
            rec["state"] = "Failed" if fail else "Succeeded"
            rec["extra"]["error"], rec["extra"]["end"] = fail, now()
            if not fail and on_success:
                on_success()
        return finish
