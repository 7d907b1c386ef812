"""Moved to ``provisioner/yamlsource.py`` (a leaf: lock and compat read YAML without importing the profile package).

This name stays only so that branches written before the move still import it after they merge; it is the very
same module object (patching ``provisioner.profile.source.X`` patches ``provisioner.yamlsource.X``). Import
``provisioner.yamlsource`` in new code; delete this file once nothing imports the old name."""

import sys

from provisioner import yamlsource

sys.modules[__name__] = yamlsource
