"""``trainvm probe --perf``: the performance probe (blocks 0-7 of issue 15).

This package runs *inside the profile's own interpreter* (any CPython >= 3.8), so it imports only
the standard library and, when importable, numpy, torch, pynvml (nvidia-ml-py) and threadpoolctl.
It must never import pydantic, packaging, rich or anything else from trainvm's own dependencies
(a test runs it under ``python -I -S``). The host side -- the typed document, ``parity`` and the
CLI -- lives in ``provisioner.verify.parity`` and ``provisioner.commands.perf``.

Entry point: ``python -c 'from provisioner.perfprobe.runner import main; main()' --budget 20``
prints one JSON document (``schema: "trainvm.perf/1"``).
"""

import gzip
import io
import tarfile
from pathlib import Path

SCHEMA = "trainvm.perf/1"



def bundle() -> bytes:
    """This package as a reproducible tar.gz (``provisioner/__init__.py`` + ``provisioner/perfprobe/*.py``,
    mtime 0, root-owned): what the startup script unpacks on the VM for profile ``perf:``."""
    here = Path(__file__).resolve().parent
    files = [("provisioner/__init__.py", b"")]
    files += [(f"provisioner/perfprobe/{p.name}", p.read_bytes()) for p in sorted(here.glob("*.py"))]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)
