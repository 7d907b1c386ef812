"""issue 30: "problems surface one round at a time: schema errors hide compatibility errors, only the first secret
is reported". One `validate` reports every independent problem, each as file:line: field: message."""

from __future__ import annotations

import re

PROFILE = """\
name: x
hardware:
  gpu: T4
  gpu_count: many
  min_memory_gib: -3
stack:
  os: ubuntu-22.04
  driver: '470.256.02'
  cuda: '12.4'
  python: 3.11.9
  packages: [torch==2.4.1+cu124]
  env:
    HF_TOKEN: hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789
    MODE: train
    AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
"""


def test_two_schema_errors_a_compat_error_and_two_secrets_in_one_run(cli, write_yaml) -> None:
    path = write_yaml(PROFILE)
    r = cli("validate", str(path))
    assert r.code == 1, r.err
    errors = [ln for ln in r.err.splitlines() if ln.startswith("error: ")]
    assert any(re.match(rf"error: {re.escape(str(path))}:4: hardware.gpu_count: ", e) for e in errors), errors
    assert any(re.match(rf"error: {re.escape(str(path))}:5: hardware.min_memory_gib: ", e) for e in errors), errors
    assert any(re.match(rf"error: {re.escape(str(path))}:8: stack.driver: .*470", e) for e in errors), errors
    assert any(re.match(rf"error: {re.escape(str(path))}:13: stack.env.HF_TOKEN: .*Hugging Face token", e) for e in errors), errors
    assert any(re.match(rf"error: {re.escape(str(path))}:15: stack.env.AWS_SECRET_ACCESS_KEY: ", e) for e in errors), errors
    assert len(errors) == 5, errors
    assert "hf_AbCdEf" not in r.err and "wJalrXUtnFEMI" not in r.err  # never repeated

    doc = cli("validate", "--json", str(path)).json()["results"][0]
    assert doc["valid"] is False and len(doc["errors"]) == 5
