"""The GCE bake hook hands ``GceBaker`` the ``GcpProvider`` it drives (its ``GceApi`` and image resolution), as the
Azure hook does the ``AzureProvider``: another provider is refused by name rather than failing inside the baker."""

from __future__ import annotations

import pytest

from provisioner.hooks import gcp


class _LooksLikeGce:
    """Not a GcpProvider, though it carries a ``gce`` attribute the baker would have read."""

    gce = object()

    def resolve_image(self, os_name: str) -> str:
        return "projects/p/global/images/x"


def test_the_gce_bake_hook_refuses_a_provider_that_is_not_gcp_provider() -> None:
    with pytest.raises(TypeError, match="GcpProvider, not _LooksLikeGce"):
        gcp.baker(_LooksLikeGce())  # type: ignore[arg-type]
