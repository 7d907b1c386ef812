"""Issue 37: no explicit ``Any`` in ``GcpProvider``'s public methods. What they return is the SDK's typed record
(``compute_v1.Instance``, ``compute_v1.Operation``: google-cloud-compute ships ``py.typed``) or a JSON document as
``dict[str, object]``, so a misspelled field of what the provider hands back is a mypy error, not an ``AttributeError``
on a real cloud. The create path's modules (provider, create, senders) are checked with ``disallow_any_explicit``."""

from __future__ import annotations

import tomllib

from tests.helpers import REPO, mypy_typo_lines

SNIPPET = '''\
from provisioner.providers.base import LaunchSpec
from provisioner.providers.gcp.provider import GcpProvider
from provisioner.providers.offer import Offer


def caller(provider: GcpProvider, spec: LaunchSpec, offer: Offer) -> None:
    op = provider.submit(spec, offer)
    print(op.status if op is not None else None, provider.instance(spec, offer, "img").labels)
    print(op.statsu if op is not None else None)  # typo
    print(provider.instance(spec, offer, "img").lables)  # typo
    report, profile = provider.read_report("vm")
    print(profile.get("name") if profile else None)
    print(profile["name"].upper() if profile else None)  # typo
    GcpProvider(credentials="not credentials")  # typo
'''

CHECKED = ["provisioner.providers.gcp.provider", "provisioner.providers.gcp.create", "provisioner.providers.gcp.senders"]


def test_the_gce_create_path_disallows_explicit_any() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    strict_any = {m for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_any_explicit") for m in o["module"]}
    assert set(CHECKED) <= strict_any


def test_a_misspelled_field_of_what_gcp_provider_returns_is_a_mypy_error(tmp_path) -> None:
    errors, typos, out = mypy_typo_lines(SNIPPET, tmp_path)
    assert errors == typos, out
