"""The clouds' names, for what must not pay for importing the registry: ``trainvm --help`` lists them in its
options' help (provisioner/cli/). The registry (registry.py, ``CLOUDS``) is the source; tests/unit/test_registry.py
keeps these in step with it. Adding a cloud: its name here too."""

from __future__ import annotations

#: every cloud trainvm knows (registry ``CLOUD_NAMES``), in the registry's order
CLOUD_NAMES: tuple[str, ...] = ("gcp", "azure", "aws", "local")
#: the clouds with a provider (registry ``provisionable_clouds()``)
PROVISIONABLE: tuple[str, ...] = ("gcp", "azure", "aws", "local")


def or_list(names: tuple[str, ...]) -> str:
    """``("gcp", "azure", "aws")`` -> ``"gcp, azure or aws"``."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else "".join(names)
