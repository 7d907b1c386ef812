"""The trainvm agent: THE probe of a machine and THE comparison with what its profile expects.

One code, three places:

- the workstation: ``trainvm verify --local``, ``capture`` and ``probe`` call :func:`report.probe`;
  ``verify NAME`` / ``verify --local`` / ``up`` judge with :func:`compare.compare` on the expectation
  ``provisioner.verify.expect`` builds from the profile;
- the VM: the startup script runs ``PYTHONPATH=/opt/trainvm/current/agent python3 -m provisioner.agent
  gpu-check | stack-check | report STATUS | stack-probe | container-check`` (see ``__main__``) on the
  same expectation, which the renderer wrote to /var/lib/trainvm/expected.json;
- inside a container image: ``stack-probe`` (the Python half only).

Design: a package inside trainvm, shipped verbatim (``bundle.bundle_files()``: these files,
``provisioner/__init__.py`` and ``packaging`` from the installed distribution) rather than trainvm's
wheel with its locked dependencies. It needs the standard library and ``packaging`` only, so it runs
on any image's python3 with nothing installed (no pip, no network, no index), and it never imports
pydantic, rich, typer, ruamel or jinja2 (a test runs it under ``python -I -S`` from the bundle alone).
The agent runs on the image's python3 (>= 3.10 on every supported image, as ``packaging`` needs) and
probes the training interpreter (``--python``) by running two stdlib-only scripts in it
(``pyenv``: CPython >= 3.8) -- exactly as ``verify --local --python`` does -- so it never shares a
``sys.path`` with the stack it judges. ``stack-probe`` needs only the standard library (any python3
in a container image). All files keep CPython 3.8 syntax (ruff's per-file target-version).
"""

SCHEMA = 1
