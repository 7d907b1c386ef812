"""``trainvm validate`` and ``trainvm schema``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TypedDict

from provisioner.errors import EXIT_CLOUD, InputError, ProfileError
from provisioner.messages import Message, MessageDoc
from provisioner.output import emit_json, print_messages
from provisioner.profile import load_profile
from provisioner.profile.reference import profile_json_schema


class ValidateResult(TypedDict):
    """One profile's result: the SPEC validate document (``validate --json`` results[]), read back for the text."""

    file: str
    valid: bool | None  # None: not checked (a registry could not be read)
    hash: str | None
    errors: list[MessageDoc]
    warnings: list[MessageDoc]


def validate_one(path: Path) -> tuple[ValidateResult, int]:
    """(SPEC validate result, exit code 0/1/2/3) for one profile. 3: the only errors are registries that
    ``--resolve-image`` could not read -- the profile was not checked, it is not invalid (``valid`` null)."""
    try:
        loaded = load_profile(path)
    except ProfileError as exc:
        errors = [m for m in exc.messages if m.level == "error"]
        warnings = [m for m in exc.messages if m.level == "warning"]
        unread = _unreachable()
        if errors and all(m.message in unread for m in errors):
            return _result(path, None, None, errors, warnings), EXIT_CLOUD
        return _result(path, False, None, errors, warnings), 1
    except InputError as exc:
        return _result(path, False, None, [Message("", f"{exc}; {exc.hint}" if exc.hint else str(exc))], []), 2
    return _result(path, True, loaded.hash, [], list(loaded.warnings)), 0


def _unreachable() -> set[str]:
    store = sys.modules.get("provisioner.container.store")  # not imported: no image was resolved (and no import)
    return store.unreachable_messages() if store is not None else set()


def _result(path: Path, valid: bool | None, digest: str | None, errors: list[Message], warnings: list[Message]) -> ValidateResult:
    return {
        "file": str(path),
        "valid": valid,
        "hash": digest,
        "errors": [m.to_json() for m in errors],
        "warnings": [m.to_json() for m in warnings],
    }


class UnreadableProfileError(InputError):
    """A profile given to ``validate`` could not be read (missing, not a file, not YAML...): exit 2; with
    ``--json`` the error document also carries every file's result."""

    def __init__(self, message: str, results: list[ValidateResult]) -> None:
        super().__init__(message)
        self.results = results


def run_validate(paths: list[Path], json_out: bool) -> int:
    results, codes = [], []
    for path in paths:
        result, rc = validate_one(path)
        results.append(result)
        codes.append(rc)
    # an unreadable file (2) first, then an invalid profile (1): a registry that could not be read (3) hides neither
    code = next((c for c in (2, 1, EXIT_CLOUD) if c in codes), 0)
    if json_out:
        if code == 2:  # like every command, an input error is one {"error": ...} document
            first = results[codes.index(2)]
            raise UnreadableProfileError(first["errors"][0]["message"], results)
        emit_json({"results": results})
        return code
    for result in results:
        msgs = [Message(**m) for m in result["errors"] + result["warnings"]]
        if result["valid"]:
            n = len(result["warnings"])
            print(f"{result['file']}: valid (hash {(result['hash'] or '')[:16]}" + (f", {n} warning{'s' * (n != 1)})" if n else ")"))
        elif result["valid"] is None:
            print(f"{result['file']}: not checked: a registry could not be read (exit 3; the profile is not known to be invalid)",
                  file=sys.stderr)
        else:
            print(f"{result['file']}: invalid", file=sys.stderr)
        print_messages(msgs)
    return code


def run_schema() -> None:
    sys.stdout.write(json.dumps(profile_json_schema(), indent=2) + "\n")
