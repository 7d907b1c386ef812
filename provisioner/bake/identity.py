"""Moved to ``provisioner/providers/image_identity.py`` (the shared providers layer: the cloud packages' bakers label
and match images with it, and a cloud package never imports the bake orchestrator).

This name stays only so that branches written before the move still import it after they merge; it is the very
same module object. Import ``provisioner.providers.image_identity`` in new code; delete this file once nothing
imports the old name."""

import sys

from provisioner.providers import image_identity

sys.modules[__name__] = image_identity
