"""Error tree. The CLI maps each class to an exit code and prints ``str(err)`` plus ``hint`` on stderr
(with ``--json`` also one ``{"error": {...}}`` document on stdout). The codes (docs/spec.md, "Exit codes"):

0 success / match; 1 the answer is no (drift, a failed startup, no feasible offer, declined);
2 usage or input error; 3 cloud or credential error; 4 no such VM; 5 not ready yet (still provisioning,
``--wait-ready`` timed out); 70 internal error (a bug); 130 interrupted.

The whole tree is here, the providers' classified cloud failures included (``ProviderError`` and its
subclasses, which drive failover: capacity -> next zone, quota -> next region or cloud, auth/validation ->
stop; ``providers/base.py`` re-exports them), and one ``CredentialsError`` whose hint each provider writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from provisioner.wording import without_html

if TYPE_CHECKING:
    from provisioner.messages import Message


EXIT_OK, EXIT_NO, EXIT_INPUT, EXIT_CLOUD, EXIT_NOT_FOUND, EXIT_NOT_READY = 0, 1, 2, 3, 4, 5
EXIT_REHEARSED = 6  # verify: a rehearsal on a machine without a GPU, no drift: its GPU facts were not checked
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


class Aborted(TrainvmError):
    """Ctrl-C or SIGTERM where a command knows what exists and what it costs (``up``): exit 130; the message is the
    one ``aborted: ...`` line (no ``error:`` prefix)."""

    exit_code = EXIT_INTERRUPTED


class ReportUnreadableError(TrainvmError):
    """A VM's stack report exists but cannot be read (not JSON, not an object, a field that fails schema 1: an
    older agent, a truncated write, a hand edit): exit 3, like a stored profile that cannot be read -- never
    "provisioning", never judged. The message names the channel and each bad field with pydantic's reason."""

    exit_code = EXIT_CLOUD


class NotReadyError(TrainvmError):
    """The VM is still provisioning (e.g. ``--wait-ready`` timed out): exit 5."""

    exit_code = EXIT_NOT_READY


# ------------------------------------------------------------------ cloud failures, classified by the providers
Outcome = Literal["created", "exists", "capacity", "quota", "quota-cloud", "retry-exhausted", "auth", "invalid", "error",
                  "deleted", "in-progress"]
Cleanup = Literal["verified", "left", "unknown"]


class CredentialsError(CloudError):
    """No usable credentials, project or subscription for a cloud (exit 3). Each provider says how to get them
    in ``hint`` (``gcloud auth application-default login``, ``az login``...)."""


class NoCloudAskedError(CredentialsError):
    """Not one cloud could be asked (no credentials, or every listing failed): exit 3, never "nothing found".
    ``skipped`` says which clouds and why (``--json`` carries it in the error document)."""

    def __init__(self, skipped: list[dict[str, str]]) -> None:
        self.skipped = skipped
        why = "; ".join(f"{s['cloud']} ({s['reason']})" for s in skipped)
        hints = "; ".join(s["hint"] for s in skipped if s.get("hint"))
        super().__init__(f"no cloud could be asked: {why}", hint=hints or None)


class ProviderError(CloudError):
    """A classified cloud failure (exit 3 when it reaches the CLI). ``code`` is the cloud's own error code."""

    outcome: Outcome = "error"

    def __init__(self, message: str, *, code: str | None = None, hint: str | None = None) -> None:
        super().__init__(without_html(message), hint=hint)  # a proxy's HTML 503 page is named, not printed
        self.code = code
        #: What the failed attempt's cleanup established: "verified" (the cloud answered that nothing of this
        #: attempt exists any more), "left" (something may still exist: ``left_behind`` names it), "unknown".
        self.cleanup: Cleanup = "unknown"
        self.left_behind: tuple[str, ...] = ()

    def leaves(self, *what: str) -> ProviderError:
        """Record resources this attempt may have left (cleanup failed or could not be checked)."""
        self.cleanup, self.left_behind = "left", (*self.left_behind, *what)
        return self

    def verified(self) -> ProviderError:
        if self.cleanup == "unknown":
            self.cleanup = "verified"
        return self


class CapacityError(ProviderError):
    outcome = "capacity"


class QuotaError(ProviderError):
    """``scope`` says how far to skip: the region, or the whole cloud (e.g. GCE GPUS_ALL_REGIONS)."""

    outcome: Outcome = "quota"

    def __init__(self, message: str, *, code: str | None = None, scope: Literal["region", "cloud"] = "region") -> None:
        super().__init__(message, code=code)
        self.scope = scope
        if scope == "cloud":
            self.outcome = "quota-cloud"


class RegionUnavailableError(ProviderError):
    """Something every offer of one region needs cannot be had there, and this says nothing about other regions
    (e.g. the region's payload store name is held by someone else: Azure's storage account names are global).
    ``provision`` skips the region's other offers and goes on with the next region; the provider has removed what it
    made for that region (``verified``) or says what it left."""


class RetryExhaustedError(ProviderError):
    """Rate limits / 5xx / a never-finishing operation, still failing after bounded retries."""

    outcome = "retry-exhausted"


class AuthError(ProviderError):
    outcome = "auth"


class VanishedError(ProviderError):
    """The VM (or the resource group holding it) was deleted by someone else while ``create`` waited for it,
    e.g. a ``trainvm down`` during a pending ``up``. The create stops: it never re-sends the request."""

    outcome = "deleted"


class AttemptInProgressError(ProviderError):
    """Another attempt owns this VM name: another ``trainvm up`` (or an interrupted one) is still creating a VM of
    that name (``where``: its zone/region), this ``up`` waited its operation timeout for it, or joined it and saw
    its create fail (that ``up`` goes on with its own failover). This attempt created nothing (cleanup verified).
    ``provision`` stops at once: any further offer would create a second, billed VM of the same name elsewhere.
    Exit 5 (not ready yet); the hint says what the user can do. Every provider raises this one class, so that
    the provision stage never branches on a cloud."""

    outcome = "in-progress"
    exit_code = EXIT_NOT_READY

    def __init__(self, message: str, *, name: str, where: str, other: str | None = None,
                 code: str = "AttemptInProgress") -> None:
        super().__init__(message, code=code, hint=(
            f"wait for the other `trainvm up` to finish, then run `trainvm up` again (it returns that VM); "
            f"`trainvm status {name}` shows it; `trainvm down {name}` removes it"))
        self.name, self.where, self.other = name, where, other
        self.verified()


class InvalidRequestError(ProviderError):
    outcome = "invalid"


class ConflictError(InvalidRequestError):
    """A VM of that name exists with another profile hash (or is not trainvm's): the answer is no, exit 1."""

    exit_code = 1
