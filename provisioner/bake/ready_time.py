"""Expected time from create to ready: the sum of per-phase terms derived from what the profile installs, each with
its basis, or "unknown" where a term cannot be known offline. Pure: no cloud call, no SDK; ``plan`` prints the total
(and each term with ``--explain``), ``plan --json`` carries all of it under ``baked_image.ready``.

Terms and their basis:
- ``boot``: the cloud's create-to-ready time from a baked image (``CloudSpec.ready_estimate.baked_s``, a public
  report: it covers create, boot, the script starting and verifying); a cloud without a published figure: unknown.
- ``driver``: in a baked image 0; else the real-OS lane's driver phase (apt update, the compute-only package set,
  dkms and headers, holds) **plus** the kernel module build, which the lane does not measure (its packages are
  empty): unknown.
- ``cuda_toolkit``: none asked 0; asked and not baked: unknown (not measured).
- ``python`` / ``packages``: the lane's phase times, plus the lock's wheel bytes at the assumed download rate; no
  lock (or wheels without a size): unknown. A container profile installs neither.
- ``container``: the image's compressed layers (lock, else the image facts cached by ``validate --resolve-image``)
  at the assumed rate (layer extraction not counted); not known offline: unknown.
- ``data``: every ``data[].size_gib`` at the assumed rate, baked or not (data is staged on every boot); a size not
  given: unknown.

The total is "about N" when every term is known, else "at least N" (the known terms) naming the unknown ones, or
"unknown" when the boot itself is. Calibration: bench/RESULTS.md "Baked image vs cold install" (run 2, 2026-11-27).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from provisioner.providers.registry import CLOUDS

if TYPE_CHECKING:
    from provisioner.profile import LoadedProfile

LANE = "measured in the real-OS lane (bench/RESULTS.md, baked vs cold, run 2)"
DRIVER_APT_S = 35.2  # apt-get update of the archive and NVIDIA's repository, the 14-package set, dkms, headers, holds
PYTHON_S = 1.2  # uv and its Python
PACKAGES_S = 0.8  # resolving and installing three small wheels: the per-install overhead beside the download
VERIFIED_S = 0.5  # a baked image: every install phase `verified` (0.003-0.12 s each)
DOWNLOAD_BYTES_S = 50e6  # ASSUMED download rate on a cloud VM (PyPI/CDN, registries, buckets): not measured by trainvm
ASSUMED = f"at an assumed {DOWNLOAD_BYTES_S / 1e6:g} MB/s (not measured)"


class TermDoc(TypedDict):
    phase: str
    seconds: float | None  # None: unknown
    basis: str


class ReadyDoc(TypedDict):
    """``ready_json``'s document (``plan --json`` baked_image.ready), which ``ready_line`` and ``basis_lines`` read."""

    seconds: int | None
    at_least: bool
    unknown: list[str]
    baked: bool
    estimate: bool
    terms: list[TermDoc]
    source: str


@dataclass(frozen=True)
class Term:
    phase: str
    seconds: float | None  # None: unknown
    basis: str

    def to_json(self) -> TermDoc:
        return {"phase": self.phase, "seconds": None if self.seconds is None else round(self.seconds, 1),
                "basis": self.basis}


def minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def _download(phase: str, size: float, what: str, extra_s: float = 0.0, extra: str = "") -> Term:
    return Term(phase, extra_s + size / DOWNLOAD_BYTES_S, f"{what}: {_gb(size)} {ASSUMED}{extra}")


def _container_bytes(loaded: LoadedProfile) -> int | None:
    lock = getattr(loaded, "lock", None)
    size = ((lock.container if lock is not None else None) or {}).get("compressed_size")
    if isinstance(size, int):
        return size
    image = getattr(getattr(loaded, "resolved", None), "image", None)
    if image is None or not image.digest:
        return None
    from provisioner.container.store import lookup  # lazy: startup (plan's path never needs the image store)

    facts = lookup(image.digest)
    return facts.compressed_size if facts is not None else None


def terms(loaded: LoadedProfile, cloud: str, baked: bool) -> list[Term]:
    """The per-phase terms of ``loaded`` on ``cloud`` (see the module doc)."""
    stack = loaded.profile.stack
    spec = CLOUDS.get(cloud)
    est = spec.ready_estimate if spec is not None else None
    out = [Term("boot", est.baked_s if est else None,
                f"create to ready from a baked image on {cloud}: {est.source}" if est
                else f"no published create-to-ready figure for {cloud}")]
    if baked:
        out.append(Term("install", VERIFIED_S, f"every install phase only verified, {LANE}"))
    else:
        out.append(Term("driver", DRIVER_APT_S, f"packages, dkms and headers, {LANE}"))
        out.append(Term("driver_module", None, "the NVIDIA kernel module build: not measured (the lane's driver "
                                               "packages are empty; on a real VM it is minutes)"))
        out.append(Term("cuda_toolkit", None, "a CUDA toolkit install: not measured") if stack.cuda_toolkit is True
                   else Term("cuda_toolkit", 0.0, "none asked (stack.cuda_toolkit)"))
        if stack.container is None:
            out.append(Term("python", PYTHON_S, f"uv and its Python, {LANE}"))
            lock = getattr(loaded, "lock", None)
            sizes = [w.size for w in lock.packages] if lock is not None else None
            if not sizes or any(s is None for s in sizes):
                why = "no lock file (`trainvm lock` records each wheel's size)" if lock is None else "wheel sizes not in the lock"
                out.append(Term("packages", None, f"package bytes unknown: {why}"))
            else:
                out.append(_download("packages", float(sum(s for s in sizes if s is not None)),
                                     f"{len(sizes)} wheels from the lock", PACKAGES_S, f", plus {PACKAGES_S:g} s install ({LANE})"))
    if stack.container is not None:
        size = _container_bytes(loaded)
        out.append(Term("container", None, "image size not known offline (`trainvm lock` or `validate --resolve-image`)")
                   if size is None else _download("container", float(size), "the image's compressed layers",
                                                  extra="; layer extraction not counted"))
    data = list(loaded.profile.data or [])
    if data:
        unsized = [d.dest for d in data if d.size_gib is None]
        sized = [d.size_gib for d in data if d.size_gib is not None]
        out.append(Term("data", None, f"data size not given for {', '.join(unsized)} (data[].size_gib)") if unsized
                   else _download("data", sum(sized) * 2**30, f"{len(data)} data source(s), staged on every boot"))
    return out


def _what(baked: bool) -> str:
    return "from the baked image" if baked else "cold install"


def ready_json(loaded: LoadedProfile, cloud: str, baked: bool) -> ReadyDoc:
    """``{seconds, at_least, unknown, baked, estimate, terms, source}``: ``seconds`` the sum of the known terms (None
    when the boot is unknown), ``at_least`` true when some term is unknown (named in ``unknown``)."""
    parts = terms(loaded, cloud, baked)
    unknown = [t.phase for t in parts if t.seconds is None]
    boot_known = parts[0].seconds is not None
    total = sum(t.seconds for t in parts if t.seconds is not None) if boot_known else None
    return {"seconds": None if total is None else round(total), "at_least": bool(unknown) and total is not None,
            "unknown": unknown, "baked": baked, "estimate": True, "terms": [t.to_json() for t in parts],
            "source": "per-phase terms (provisioner/bake/ready_time.py; `plan --explain` shows each basis)"}


def ready_line(doc: ReadyDoc, cloud: str) -> str:
    """The one line ``plan`` prints for ``ready_json``'s document."""
    what = _what(doc["baked"])
    if doc["seconds"] is None:
        return f"expected time to ready: unknown on {cloud} ({what}; no published create-to-ready figure for {cloud})"
    known = ", ".join(f"{t['phase']} {minutes(t['seconds'])}" for t in doc["terms"] if t["seconds"])
    if doc["at_least"]:
        return (f"expected time to ready: at least {minutes(doc['seconds'])} {what} ({known}; not known: "
                f"{', '.join(doc['unknown'])}; `plan --explain` shows each term's basis)")
    return f"expected time to ready: about {minutes(doc['seconds'])} {what} ({known}; an estimate: `plan --explain` shows its basis)"


def basis_lines(doc: ReadyDoc) -> list[str]:
    """``plan --explain``: each term and its basis."""
    return ["time to ready, by phase:"] + [
        f"  {t['phase']}: {'unknown' if t['seconds'] is None else minutes(t['seconds'])} - {t['basis']}" for t in doc["terms"]]
