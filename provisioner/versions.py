"""Version comparisons: the agent's (``provisioner.agent.versions``), the one place that says what
"the same version" means, on the workstation and on the VM alike."""

from provisioner.agent.versions import equal, matches_at_precision, parse, same_release_prefix

__all__ = ["equal", "matches_at_precision", "parse", "same_release_prefix"]
