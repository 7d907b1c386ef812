"""``python -m provisioner.cli`` runs the console script's ``entry`` (``python -m provisioner`` adds
``console.py``'s Ctrl-C guard around it)."""

from provisioner.cli import entry

entry()
