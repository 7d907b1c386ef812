"""The ``local`` cloud: a QEMU VM on this machine (issue 38)."""
