"""The SSH public key a VM's admin user gets: the one place that finds and checks it (every cloud)."""

from __future__ import annotations

from pathlib import Path

from provisioner.errors import InputError

SSH_KEY_FILES = ("~/.ssh/id_ed25519.pub", "~/.ssh/id_rsa.pub")


def read_public_key(configured: str | None) -> str | None:
    """``configured`` (a path: $TRAINVM_SSH_PUBLIC_KEY or a provider's own setting) or else the first of
    SSH_KEY_FILES that exists; its first line, checked to be an OpenSSH public key. None when nothing is
    configured and no default file exists; an unreadable configured path or a non-key file is an InputError."""
    for raw in [configured] if configured else list(SSH_KEY_FILES):
        path = Path(raw).expanduser()
        try:
            key = path.read_text().strip()
        except OSError:
            if configured:
                raise InputError(f"TRAINVM_SSH_PUBLIC_KEY={configured}: cannot read the SSH public key") from None
            continue
        if not key.startswith(("ssh-rsa ", "ssh-ed25519 ", "ecdsa-sha2-nistp")):
            raise InputError(f"{path} does not look like an OpenSSH public key (ssh-ed25519/ssh-rsa/ecdsa-...)")
        return key.splitlines()[0]
    return None
