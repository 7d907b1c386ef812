from provisioner.console import entry

entry()
