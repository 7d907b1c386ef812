"""The one quoting filter (``shq``) and the Jinja2 environment of the startup-script templates.

Every value a shell template interpolates goes through ``| shq`` (``shlex.quote`` for strings,
decimal digits for integers, 1/0 for booleans), so no profile string can ever be parsed as shell
code. ``tests/render/test_template_lint.py`` fails on any ``{{ }}`` that bypasses it. The
cloud-init template is YAML, not shell: there the only filter is ``yaml_block``.
"""

from __future__ import annotations

import functools
import hashlib
import shlex
from pathlib import Path

import jinja2

from provisioner import __version__, settings
from provisioner.bundled import templates_dir
from provisioner.cache import cache_dir
from provisioner.errors import RenderError


def template_dir() -> Path:
    """``templates/``: inside the wheel (``provisioner/templates``) or at the repository root."""
    found = templates_dir()
    if not (found / "startup.sh.j2").is_file():
        raise RenderError(f"startup-script templates not found (looked in {found})")
    return found


def shq(value: object) -> str:
    """Quote ``value`` as one shell word (single quotes; ``'`` becomes ``'"'"'``). The only way
    values enter a shell template."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if "\x00" in value:
            raise RenderError("a value contains a NUL byte, which no shell word can hold")
        quoted = shlex.quote(value)
        # Always a quoted word: shellcheck reads a bare us-central1-a as arithmetic (SC2100).
        return quoted if quoted.startswith("'") else f"'{quoted}'"
    raise RenderError(f"shq cannot quote a {type(value).__name__} ({value!r}); pass a str, int or bool")


def yaml_block(text: str, indent: int) -> str:
    """``text`` as the body of a YAML literal block scalar (``|``), indented by ``indent``.

    The caller checks that the document parses back to ``text`` (script.py falls back to
    gzip+base64 otherwise)."""
    if not isinstance(text, str):
        raise RenderError("yaml_block needs a string")
    pad = " " * indent
    return "\n".join(pad + line if line else "" for line in text.split("\n"))


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates in the parsed-data cache (compiling the startup script's templates costs ~30 ms of
    `plan --json`): jinja2 keys each by the template's source checksum and the Python version; the folder's name
    adds this module (the environment's options) and the trainvm and jinja2 versions. ``TRAINVM_NO_CACHE``: none."""
    if settings.is_set("TRAINVM_NO_CACHE"):
        return None
    key = hashlib.sha256(f"{__version__}:{jinja2.__version__}:".encode() + Path(__file__).read_bytes()).hexdigest()[:16]
    folder = cache_dir() / f"jinja-{key}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: compile every time
        return None
    return _QuietBytecodeCache(str(folder))


class _QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """jinja2's file cache, except that a cache that cannot be written (its folder removed meanwhile, a full disk)
    costs a compile, never an error. Reading is already forgiving (a missing or bad entry is recompiled)."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


@functools.cache
def template_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # bash's ${#array[@]} would open a Jinja comment; templates use no comments.
        comment_start_string="{=#",
        comment_end_string="#=}",
        bytecode_cache=_bytecode_cache(),
    )
    env.filters["shq"] = shq
    env.filters["yaml_block"] = yaml_block
    return env
