"""``trainvm probe --perf``: the performance probe (blocks 0-7 of issue 15).

This package runs *inside the profile's own interpreter* (any CPython >= 3.8), so it imports only
the standard library and, when importable, numpy, torch, pynvml (nvidia-ml-py) and threadpoolctl.
It must never import pydantic, packaging, rich or anything else from trainvm's own dependencies
(a test runs it under ``python -I -S``). The host side -- the typed document, ``parity`` and the
CLI -- lives in ``provisioner.verify.parity`` and ``provisioner.commands.perf``.

Entry point: ``python -c 'from provisioner.perfprobe.runner import main; main()' --budget 20``
prints one JSON document (``schema: "trainvm.perf/1"``).
"""

SCHEMA = "trainvm.perf/1"
