"""Error tree. The CLI maps each class to an exit code and prints ``str(err)`` plus ``hint`` on stderr
(with ``--json`` also one ``{"error": {...}}`` document on stdout). The codes (docs/spec.md, "Exit codes"):

0 success / match; 1 the answer is no (drift, a failed startup, no feasible offer, declined);
2 usage or input error; 3 cloud or credential error; 4 no such VM; 5 not ready yet (still provisioning,
``--wait-ready`` timed out); 70 internal error (a bug); 130 interrupted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provisioner.profile.messages import Message


EXIT_OK, EXIT_NO, EXIT_INPUT, EXIT_CLOUD, EXIT_NOT_FOUND, EXIT_NOT_READY = 0, 1, 2, 3, 4, 5
EXIT_INTERNAL, EXIT_INTERRUPTED = 70, 130


class TrainvmError(Exception):
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class InputError(TrainvmError):
    """Missing file, unparsable YAML, bad flag value: exit 2."""

    exit_code = 2


class ProfileError(TrainvmError):
    """The profile is invalid (schema or compatibility): exit 1. Carries every message."""

    exit_code = 1

    def __init__(self, messages: Sequence[Message], *, hint: str | None = None) -> None:
        self.messages = tuple(messages)
        super().__init__("\n".join(m.render() for m in self.messages), hint=hint)


class CatalogError(InputError):
    """The catalog folder or one of its files is unusable."""


class NoFeasibleOfferError(TrainvmError):
    exit_code = 1


class RenderError(TrainvmError):
    exit_code = 1


class CloudError(TrainvmError):
    """A cloud API or credential problem: exit 3."""

    exit_code = 3


class CapacityExhaustedError(TrainvmError):
    """Every offer was tried and none had capacity or quota: exit 1."""

    exit_code = 1


class NotFoundError(TrainvmError):
    """No trainvm VM of that name on any cloud with credentials: exit 4 (status, verify, logs, ssh)."""

    exit_code = EXIT_NOT_FOUND


class NotReadyError(TrainvmError):
    """The VM is still provisioning (e.g. ``--wait-ready`` timed out): exit 5."""

    exit_code = EXIT_NOT_READY
