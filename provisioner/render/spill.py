"""Spilling: embedded files that the startup script needs only after it has started, moved out of user data
into the instance's own tags, where the user data is too small for the script (AWS: 16,384 bytes).

Where the cloud allows it (providers/registry.py ``UserDataFormat.spill_tags`` > 0) and the compacted,
gzipped script does not fit, ``render_script`` moves whole quoted heredocs of the allowlist ``SPILLABLE``
out of the script, the largest first, until it fits (``spill_to_fit``). Nothing is spilled when the
script fits. For each spilled heredoc:

- its exact content (as it would have been in the script, after compaction) is gzipped, base64-encoded and
  cut into values of at most 256 characters: instance tags ``tv-f<I>-<K>`` (``SpilledFile.tags``);
- the script keeps its name, its index and the number of tags, and one sha256 for all spilled files
  (``combined_sha256``); ``tv_start`` calls ``tv_spilled`` (templates/entry/_aws.sh.j2), which reads the tags
  from the instance metadata (IMDSv2), joins and decodes them into ``/var/lib/trainvm/spill/NAME`` and checks
  the sha256; the heredoc's command reads that file instead (``<<'NAME'`` becomes
  ``<"$TV_STATE/spill/NAME"``). A tag that is missing or content that does not match (anyone with
  ``ec2:CreateTags`` on the instance can change a tag) is read again, 30 tries TRAINVM_RETRY_SLEEP apart; then
  the script stops with ``failed:spill:LINE`` before any phase and any use of the files (they are removed).
  Files already there with the right sha256 are not read again (a re-run).
- Cost in user data: the fetch and the sha256 (~330 gzipped bytes) and ~25 per spilled file; a file saves about
  its gzipped size. Tags: about one per 190 bytes of gzipped file.

Only files that hold no profile value and no secret can be spilled: the allowlist names heredocs whose
content is a file of the repository (templates/files, templates/datatools) as compacted, never a profile
value (tests/render/test_spill.py checks the templates), and ``spill_to_fit`` refuses content in which
``provisioner.secrets.find_secret`` sees a credential. Credentials never live in the script at all: the VM
reads ``secret://`` references itself (docs/data-tools.md).

EC2 facts this relies on (docs.aws.amazon.com):

- "Tag restrictions" (EC2 User Guide): at most 50 tags per resource, keys <= 128 and values <= 256 Unicode
  characters, letters, digits, spaces and ``+ - = . _ : / @``: base64 (``A-Za-z0-9+/=``) fits a value.
- "View tags for your EC2 instances using instance metadata" (work-with-tags-in-IMDS.html): tags are in IMDS
  only with ``MetadataOptions.InstanceMetadataTags=enabled`` (aws_request sets it on every instance); then
  every instance tag key may only hold letters, digits and ``+ - = . , _ : @`` (no space, no ``/``), or the
  launch fails; "If you add or remove an instance tag, the instance metadata is updated while the instance
  is running". The tags of RunInstances' TagSpecifications are applied at launch; the documentation does not
  promise they are in IMDS when user data first runs, hence the wait.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from provisioner.errors import RenderError

#: heredocs that may be spilled: each holds a repository file only (no profile value) and is read after
#: ``tv_start`` (the helper, TRAINVM_HELPER_PY, is not: tv_start and every failure report need it)
SPILLABLE = ("TRAINVM_COPY_PY", "TRAINVM_LOCK_GS", "TRAINVM_LOCK_S3", "TRAINVM_LOCK_AZ",
             "TRAINVM_WATCHDOG_SH", "TRAINVM_LIFECYCLE_SH", "TRAINVM_CONTAINER_PY")
TAG_PREFIX = "tv-f"
TAG_VALUE_MAX = 256
#: what an instance tag key may hold when tags are in IMDS (work-with-tags-in-IMDS.html)
IMDS_KEY = re.compile(r"^[A-Za-z0-9+\-=.,_:@]{1,128}$")
#: what an EC2 tag value may hold ("Tag restrictions"; ASCII subset)
TAG_VALUE = re.compile(r"^[A-Za-z0-9 +\-=._:/@]{0,256}$")


@dataclass(frozen=True)
class SpilledFile:
    """One heredoc carried in instance tags instead of the script."""

    name: str  # the heredoc's delimiter (TRAINVM_COPY_PY): the file /var/lib/trainvm/spill/NAME on the VM
    index: int  # its tags are tv-f<index>-0, -1, ...
    sha256: str  # of the content, checked on the VM
    size: int  # bytes of the content
    tags: tuple[tuple[str, str], ...]  # (key, value) in order

    @property
    def chunks(self) -> int:
        return len(self.tags)

    @property
    def arg(self) -> str:
        """How ``tv_unspill`` names it: NAME:INDEX:TAGS."""
        return f"{self.name}:{self.index}:{self.chunks}"


def combined_sha256(files: tuple[SpilledFile, ...]) -> str:
    """The one sha256 the script keeps for all its spilled files: of their sha256s, one ``HEX  -`` line each in
    order (what ``for f; do sha256sum <f; done | sha256sum`` prints on the VM), so no byte can move between files."""
    return hashlib.sha256("".join(f"{f.sha256}  -\n" for f in files).encode("ascii")).hexdigest()


def spilled_file(name: str, index: int, content: str) -> SpilledFile:
    data = content.encode("utf-8")
    packed = base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode("ascii")
    chunks = [packed[i:i + TAG_VALUE_MAX] for i in range(0, len(packed), TAG_VALUE_MAX)]
    tags = tuple((f"{TAG_PREFIX}{index}-{k}", c) for k, c in enumerate(chunks))
    return SpilledFile(name, index, hashlib.sha256(data).hexdigest(), len(data), tags)


def unspill(tags: dict[str, str], spilled: SpilledFile) -> bytes:
    """The content back from ``tags`` (what the VM does; for tests and ``trainvm render``'s checks)."""
    packed = "".join(tags[k] for k, _ in spilled.tags)
    return gzip.decompress(base64.b64decode(packed))


def heredocs(script: str) -> dict[str, str]:
    """The content of each allowlisted heredoc that occurs exactly once in ``script`` (quoted, its delimiter
    alone on its closing line)."""
    out: dict[str, str] = {}
    for name in SPILLABLE:
        opener = f"<<'{name}'\n"
        if script.count(f"<<'{name}'") != 1 or script.count(f"\n{name}\n") != 1:
            continue
        start = script.find(opener)
        if start < 0:
            continue
        body_start = script.find("\n", start) + 1
        end = script.find(f"\n{name}\n", body_start - 1)
        if end < body_start - 1:
            continue
        out[name] = script[body_start:end + 1]
    return out


def replace_heredocs(script: str, files: tuple[SpilledFile, ...]) -> str:
    """``script`` with the heredoc of each of ``files`` read from ``$TV_STATE/spill/NAME`` instead."""
    for f in files:
        content = heredocs(script).get(f.name)
        if content is None or hashlib.sha256(content.encode("utf-8")).hexdigest() != f.sha256:
            raise RenderError(f"internal: heredoc {f.name} to spill is not in the script as it was measured")
        script = script.replace(f"<<'{f.name}'\n{content}{f.name}\n", f"<\"$TV_STATE/spill/{f.name}\"\n", 1)
    return script


def check_tags(tags: tuple[tuple[str, str], ...]) -> None:
    for key, value in tags:
        if not IMDS_KEY.match(key) or not TAG_VALUE.match(value):
            raise RenderError(f"internal: spilled tag {key} breaks EC2's tag restrictions")


def spill_to_fit(full: str, render: Callable[[tuple[SpilledFile, ...]], str], fits: Callable[[str], bool],
                 max_tags: int) -> tuple[str, tuple[SpilledFile, ...]]:
    """The script with the fewest heredocs spilled, the largest (gzipped) first, so that ``fits`` it and the
    tags stay within ``max_tags``; ``(full, ())`` when even spilling every candidate does not help.
    ``render(spilled)`` renders the script again with the fetch of ``spilled`` (before the heredocs are
    replaced); ``full`` is the script without spill."""
    from provisioner.secrets import find_secret

    bodies = heredocs(full)
    order = sorted(bodies, key=lambda n: (-len(gzip.compress(bodies[n].encode(), 9, mtime=0)), n))
    chosen: list[SpilledFile] = []
    for name in order:
        what = find_secret(bodies[name], guess=False)
        if what is not None:
            raise RenderError(f"internal: the embedded file {name} would carry {what}; it is never spilled to tags")
        spilled = spilled_file(name, len(chosen), bodies[name])
        if sum(len(f.tags) for f in chosen) + len(spilled.tags) > max_tags:
            continue  # a smaller file may still fit the tag budget
        check_tags(spilled.tags)
        chosen.append(spilled)
        script = replace_heredocs(render(tuple(chosen)), tuple(chosen))
        if fits(script):
            return script, tuple(chosen)
    return full, ()
