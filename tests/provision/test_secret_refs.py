"""Issue 36 item 11: what a VM's identity may read of the secret stores (GCE's cloud-platform scope, AWS's
GetSecretValue) comes from the resolved profile's secret references (``LaunchSpec.secret_refs``, built once by
``provision.launch.secret_refs``), never from a search of the profile's JSON text: before, the text
``secret://gcp/`` anywhere (an ``env`` value that only mentions it, a data URL) granted cloud-platform, and
``secret://aws/NAME`` anywhere granted GetSecretValue on NAME."""

from __future__ import annotations

import pytest

from provisioner.providers.aws import request as aws_request
from provisioner.providers.base import SecretRef
from provisioner.providers.gcp.request import SCOPE_CLOUD_PLATFORM, SCOPE_GCS_READ, scopes_for
from tests.contract.clouds_fake import gce_offer

STACK = """\
name: secrets
stack:
  os: ubuntu-22.04
  driver: "550.127.05"
  cuda: "12.4"
  python: "3.11.9"
  packages: [torch==2.4.1+cu124]
  env:
{env}
hardware:
  gpu: T4
{data}"""
#: text that mentions references without being one: a note in env, a query string of a public URL
MENTIONS = ('    NOTE: "the token is kept at secret://gcp/hf-token and secret://aws/hf/token"\n',
            'data:\n  - {source: "https://example.com/glue.tar?from=secret://gcp/x&also=secret://aws/y", dest: /mnt/data/glue}\n')


def spec_of(write_yaml, env: str, data: str = ""):
    from provisioner.profile import load_profile
    from provisioner.provision.launch import launch_spec
    from provisioner.render.script import render_for_offer

    loaded, offer = load_profile(write_yaml(STACK.format(env=env, data=data))), gce_offer("us-central1-a")
    return launch_spec(loaded, offer, rendered=render_for_offer(loaded, offer))


def test_a_string_that_mentions_a_secret_reference_grants_nothing(write_yaml) -> None:
    spec = spec_of(write_yaml, *MENTIONS)
    assert "secret://gcp/hf-token" in spec.profile_json and "secret://aws/y" in spec.profile_json
    assert spec.secret_refs == ()
    scopes = scopes_for(spec)
    assert SCOPE_CLOUD_PLATFORM not in scopes and SCOPE_GCS_READ in scopes  # before: cloud-platform
    assert aws_request.secret_names(spec) == []
    policy = aws_request.role_policy(spec, "us-east-1") or {"Statement": []}
    assert not [s for s in policy["Statement"] if s["Action"] == "secretsmanager:GetSecretValue"]


@pytest.mark.parametrize(("env", "data", "refs"), [
    ('    HF_TOKEN: secret://gcp/hf-token\n', "", (SecretRef("gcp", "hf-token"),)),
    ("    A: secret://aws/b\n    B: secret://aws/arn:aws:secretsmanager:us-west-2:123456789012:secret:hf/token\n", "",
     (SecretRef("aws", "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf/token"), SecretRef("aws", "b"))),
    ('    X: "1"\n', 'data:\n  - {source: "gs://example-ml-data/glue/", dest: /mnt/data/glue, credential: "secret://gcp/reader"}\n',
     (SecretRef("gcp", "reader"),)),
])
def test_the_references_the_vm_resolves_are_granted(write_yaml, env, data, refs) -> None:
    spec = spec_of(write_yaml, env, data)
    assert spec.secret_refs == refs
    gcp = any(r.kind == "gcp" for r in refs)
    assert (SCOPE_CLOUD_PLATFORM in scopes_for(spec)) is gcp
    names = [r.name for r in refs if r.kind == "aws"]
    assert aws_request.secret_names(spec) == sorted(names)
    if names:
        [grant] = [s for s in aws_request.role_policy(spec, "eu-west-1")["Statement"]  # type: ignore[index]
                   if s["Action"] == "secretsmanager:GetSecretValue"]
        assert grant["Resource"] == aws_request.secret_resources(sorted(names), "eu-west-1")
