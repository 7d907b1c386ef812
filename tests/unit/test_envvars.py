"""Numeric environment settings: one parser, input errors (exit 2) for bad values."""

from __future__ import annotations

import pytest

from provisioner.errors import InputError
from provisioner.settings import env_seconds


def test_env_seconds(monkeypatch) -> None:
    monkeypatch.delenv("TRAINVM_LOGS_POLL_SECONDS", raising=False)
    assert env_seconds("TRAINVM_LOGS_POLL_SECONDS", 5.0) == 5.0
    monkeypatch.setenv("TRAINVM_LOGS_POLL_SECONDS", "0.25")
    assert env_seconds("TRAINVM_LOGS_POLL_SECONDS", 5.0) == 0.25
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("TRAINVM_LOGS_POLL_SECONDS", bad)
        with pytest.raises(InputError) as info:
            env_seconds("TRAINVM_LOGS_POLL_SECONDS", 5.0)
        assert info.value.exit_code == 2 and "TRAINVM_LOGS_POLL_SECONDS" in str(info.value)


def test_bad_provider_setting_is_a_clear_input_error(cli, monkeypatch) -> None:
    monkeypatch.setenv("TRAINVM_GCE_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "p")
    monkeypatch.setenv("TRAINVM_GCE_OP_TIMEOUT", "abc")
    r = cli("list", "--json")
    assert r.code == 2 and "TRAINVM_GCE_OP_TIMEOUT='abc' is not a number of seconds" in r.err
