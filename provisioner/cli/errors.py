"""The error output of ``trainvm``: an error is one readable paragraph on stderr (no credential, no terminal
control code; ``hint:`` on its own line) and its exit code; with ``--json`` also one ``{"error": {...}}`` document
on stdout (docs/spec.md "Exit codes"). ``--debug`` (``TRAINVM_DEBUG``) prints the traceback first."""


import sys


def emit_error(exc: BaseException, code: int, hint: str | None, *, kind: str | None = None,
               text: str | None = None) -> None:
    import json  # lazy: startup

    from provisioner.secrets import redact  # lazy: startup

    message = redact(text or (exc.format_message() if hasattr(exc, "format_message") else str(exc)))  # click: no "Error: "
    doc: dict[str, object] = {"message": message, "hint": hint, "exit_code": code,
                              "type": kind or type(exc).__name__}
    messages = getattr(exc, "messages", None)
    if messages:  # ProfileError: every validation message, located
        doc["messages"] = [m.to_json() for m in messages]
    attempts = getattr(exc, "attempts", None)
    if attempts:  # ProvisionError: what was tried
        doc["attempts"] = [a.to_json() for a in attempts]
    skipped = getattr(exc, "skipped", None)
    if skipped:  # no cloud could be asked: which, and why
        doc["skipped"] = skipped
    similar = getattr(exc, "similar", None)
    if similar is not None:  # `down` of an unknown name: the live VMs it resembles
        doc["similar"] = similar
    results = getattr(exc, "results", None)
    if results:  # validate: every file's result, the unreadable one included
        doc["results"] = results
    sys.stdout.write(json.dumps({"error": doc}, indent=2, default=str) + "\n")


def fail(exc: BaseException, code: int, hint: str | None, internal: bool = False, json_out: bool = False,
         text: str | None = None) -> None:
    from provisioner.settings import is_set  # lazy: startup

    if is_set("TRAINVM_DEBUG"):
        import traceback  # lazy: startup

        traceback.print_exception(exc)
    from provisioner.output import printable  # lazy: startup
    from provisioner.secrets import redact  # lazy: startup

    if internal:
        text = f"internal error: {type(exc).__name__}: {exc}"
    if json_out:
        emit_error(exc, code, hint, kind="internal" if internal else None, text=text)
    # no credential, no terminal control code
    sys.stderr.write(printable(redact((text or f"error: {exc}").rstrip())) + "\n")
    if hint:
        sys.stderr.write(f"hint: {printable(hint)}\n")
    sys.exit(code)
