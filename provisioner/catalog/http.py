"""Moved to ``provisioner/providers/http.py`` (issue 37: the price sources of providers/<cloud>/prices.py use it, and
a cloud package imports nothing from catalog/). This name stays for branches and tests written before the move; it is
the very same module object (patching ``provisioner.catalog.http.X`` patches ``provisioner.providers.http.X``)."""

import sys

from provisioner.providers import http

sys.modules[__name__] = http
