from provisioner.cli import entry

entry()
