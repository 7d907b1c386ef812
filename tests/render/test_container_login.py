"""The container phase's registry login under the stub harness: the helper writes a private docker config (0600 in a
0700 folder) that only the pull reads (DOCKER_CONFIG), from a ``stack.container.registry_auth`` secret or the VM's
identity (GCE metadata token; ACR's /oauth2/exchange, stubbed from its documented wire format in
tests/stubharness/pyfake), and removes it after the pull; the credential is never in argv, the console, provision.log
or the report. The stub docker refuses a pull ("unauthorized") unless the config holds the credential the registry
wants (STUB_REGISTRY_CREDENTIAL), as a real registry would; it does not model docker's credential helpers
(credsStore), which the private config does not use. ECR's login runs against moto: tests/aws/test_ecr_login.py."""

from __future__ import annotations

import json
import re

import trainvm_render_support as S

DIGEST = "sha256:" + "c" * 64
TOKEN = "nvapi-Zx9QvT3kLm0pWr8sYb2NcD4fGh6JkL1"


def script(cloud: str = "gcp", **container) -> str:
    doc = S.container_profile(**container)
    doc["data"] = []
    return S.render(S.from_dict(doc), cloud).startup_sh


def pulls(run):
    return [c for c in run.named("docker") if c.args[0] == "pull"]


def assert_never_shown(run, h, *values):
    text = run.output + h.path("/var/log/trainvm/provision.log").read_text() + json.dumps(run.report)
    for value in values:
        assert value not in text
        assert all(value not in a for c in run.calls for a in c.args)


def test_a_secret_logs_in_through_a_private_config_removed_after_the_pull(make_harness):
    text = script(registry_auth="secret://gcp/ngc-key")
    assert "TV_REGISTRY_LOGIN='secret'" in text and "TV_REGISTRY_LOGIN_ARG='secret://gcp/ngc-key'" in text
    assert "docker login" not in text
    h = make_harness(text, STUB_SECRETS=json.dumps({"gcp/ngc-key": TOKEN}), STUB_REGISTRY_CREDENTIAL=f"$oauthtoken:{TOKEN}")
    run = h.run()
    assert run.rc == 0 and run.status == "ready", run.output[-3000:]
    assert [c.args for c in pulls(run)] == [["pull", f"nvcr.io/nvidia/pytorch@{DIGEST}"]]
    assert (h.state / "docker-pull-config").read_text().split() == [str(h.path("/var/lib/trainvm/registry-auth"))]
    assert not h.path("/var/lib/trainvm/registry-auth").exists()  # removed once the image is here
    assert_never_shown(run, h, TOKEN)


def test_a_user_password_secret_and_a_refusing_registry_report_unauthorized_without_the_secret(make_harness):
    h = make_harness(script(registry_auth="secret://gcp/reg"), STUB_SECRETS=json.dumps({"gcp/reg": "robot:wrong-Pa55word-xyz"}),
                     STUB_REGISTRY_CREDENTIAL="robot:right-Pa55word-xyz")
    run = h.run()
    assert run.rc != 0 and re.fullmatch(r"failed:container:\d+", run.status), run.output[-2000:]
    err = run.report["error"]
    assert "unauthorized: nvcr.io refused the pull (image pull: secret://gcp/reg" in err and "authentication required" in err
    assert len(pulls(run)) == 2  # the background pull, then one more: a refusal is not retried
    assert not h.path("/var/lib/trainvm/registry-auth").exists()
    assert_never_shown(run, h, "wrong-Pa55word-xyz")


def test_without_a_login_a_private_image_fails_as_unauthorized(make_harness):
    text = script()
    assert "TV_REGISTRY_LOGIN=''" in text
    run = make_harness(text, STUB_REGISTRY_CREDENTIAL="robot:pw-1234").run()
    assert run.rc != 0 and "unauthorized: nvcr.io refused the pull (image pull: anonymous" in run.report["error"]


def test_a_secret_that_cannot_be_read_fails_the_login_by_name(make_harness):
    h = make_harness(script(registry_auth="secret://gcp/gone"), STUB_SECRETS=json.dumps({"gcp/gone": None}))
    run = h.run()
    assert run.rc != 0 and re.fullmatch(r"failed:container:\d+", run.status)
    assert "could not log in to nvcr.io for the pull (secret://gcp/gone" in run.report["error"]
    assert "HTTP 404" in run.report["error"] and pulls(run) == []


def test_artifact_registry_on_gce_uses_the_metadata_token(make_harness):
    image = f"us-docker.pkg.dev/my-proj/train/pytorch:1@{DIGEST}"
    h = make_harness(script(image=image), STUB_REGISTRY_CREDENTIAL="oauth2accesstoken:stub-token")
    run = h.run()
    assert run.rc == 0 and run.status == "ready", run.output[-3000:]
    assert "http\tGET\thttp://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token" in \
        (h.state / "calls.log").read_text()
    assert not h.path("/var/lib/trainvm/registry-auth").exists()


def test_acr_on_azure_exchanges_the_managed_identity_token(make_harness):
    image = f"myteamregistry.azurecr.io/team/train:1@{DIGEST}"
    h = make_harness(script("azure", image=image), cloud="azure",
                     STUB_REGISTRY_CREDENTIAL="00000000-0000-0000-0000-000000000000:acr-refresh-for-myteamregistry.azurecr.io")
    run = h.run()
    assert run.rc == 0 and run.status == "ready", run.output[-3000:]
    calls = (h.state / "calls.log").read_text()
    assert "resource=https%3A%2F%2Fmanagement.azure.com%2F" in calls
    assert "http\tPOST\thttps://myteamregistry.azurecr.io/oauth2/exchange" in calls
