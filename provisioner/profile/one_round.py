"""Every independent problem of a profile in one run (issue 30), for a profile whose schema check failed:

- every ``stack.env`` value that looks like a secret, each at its own key and line (the model's ``check_env`` stops
  at the first problem, so pydantic reports one ``stack.env`` error: that one is replaced by these);
- the compatibility errors of the parts that parsed: the fields pydantic rejected are left out (their default, or
  nothing) and the rest validated again, at most a few rounds; when that passes, the compatibility rules run on it
  and their messages are kept, except those about a field that was left out or lies under one. When the rest does
  not validate (a required field was the broken one), no compatibility message is given: they would be guesses.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from provisioner.compat.rules import check_profile
from provisioner.profile.fields import SECRET_HINT, looks_like_secret
from provisioner.profile.loader import _split_path
from provisioner.profile.messages import Message
from provisioner.profile.model import Profile
from provisioner.yamlsource import Located

ROUNDS = 4
ENV = ("stack", "env")


def env_secrets(doc: Located) -> list[Message]:
    """One message per ``stack.env`` value that looks like a secret (the value itself is never repeated)."""
    stack = doc.data.get("stack") if isinstance(doc.data, dict) else None
    env = stack.get("env") if isinstance(stack, dict) else None
    out: list[Message] = []
    if not isinstance(env, dict):
        return out
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            continue
        what = looks_like_secret(key, value)
        if what:
            file, line = doc.where((*ENV, key))
            out.append(Message(f"stack.env.{key}", f"the value looks like {what}; secrets never go into a profile: "
                                                    f"{SECRET_HINT}", file=file, line=line))
    return out


def _drop(data: Any, path: tuple[Any, ...]) -> bool:
    node = data
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(node, dict) and path and path[-1] in node:
        del node[path[-1]]
        return True
    return False


def compat_of_what_parsed(exc: ValidationError, doc: Located, paths: Any) -> list[Message]:
    """The compatibility messages of the profile without the fields ``exc`` rejected (see the module doc);
    ``paths(loc)`` turns a pydantic loc into the profile path (loader._loc_path)."""
    data, dropped = copy.deepcopy(doc.data), []
    for _ in range(ROUNDS):
        progress = False
        for err in exc.errors(include_url=False):
            path = paths(tuple(err["loc"]))[0]
            if err["type"] == "missing" or not path:
                return []
            while path and not _drop(data, path):
                path = path[:-1]
            if path:
                dropped.append(".".join(str(p) for p in path))
                progress = True
        if not progress:
            return []
        try:
            profile = Profile.model_validate(data)
            break
        except ValidationError as again:
            exc = again
    else:
        return []
    out = []
    for m in check_profile(profile):
        if any(m.path == d or m.path.startswith((d + ".", d + "[")) for d in dropped):
            continue
        file, line = doc.where(_split_path(m.path))
        out.append(m.located(file, line))
    return out
