"""providers/ssh_key.py: the one SSH public key finder every provider uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.errors import InputError
from provisioner.providers.ssh_key import read_public_key

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+wyqDHpSQEQQ5Y8xBEKq me@host"


def test_configured_path_first_line(tmp_path: Path) -> None:
    f = tmp_path / "k.pub"
    f.write_text(KEY + "\nsecond line\n")
    assert read_public_key(str(f)) == KEY


def test_configured_but_unreadable_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the SSH public key"):
        read_public_key(str(tmp_path / "missing.pub"))


def test_a_private_key_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "id_ed25519"
    f.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n")
    with pytest.raises(InputError, match="does not look like an OpenSSH public key"):
        read_public_key(str(f))


def test_default_files_in_order_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert read_public_key(None) is None
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_rsa.pub").write_text("ssh-rsa AAAAB3NzaC1yc2E rsa@host\n")
    assert read_public_key(None) == "ssh-rsa AAAAB3NzaC1yc2E rsa@host"
    (tmp_path / ".ssh" / "id_ed25519.pub").write_text(KEY + "\n")
    assert read_public_key(None) == KEY
