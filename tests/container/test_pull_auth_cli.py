"""``plan`` says how the VM will log in to the image's registry (providers/registry_auth.py): its own identity for its
own cloud's registry, a ``stack.container.registry_auth`` secret, or anonymous; and warns when the registry is another
cloud's, which the VM cannot log in to."""

from __future__ import annotations

import pytest

DIGEST = "sha256:" + "b" * 64
NGC = f"nvcr.io/nvidia/pytorch:24.08-py3@{DIGEST}"
AR = f"us-docker.pkg.dev/my-proj/train/pytorch:1@{DIGEST}"
ECR = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/team/train:1@{DIGEST}"
ACR = f"myteamregistry.azurecr.io/team/train:1@{DIGEST}"


def profile(image: str, **container):
    return {"name": "ngc", "hardware": {"gpu": "T4"},
            "stack": {"os": "ubuntu-22.04", "driver": "560.35.03", "container": {"image": image, **container}}}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES", raising=False)


def plan(cli, write_yaml, doc, cloud):
    text = cli("plan", str(write_yaml(doc)), "--cloud", cloud)
    js = cli("plan", str(write_yaml(doc)), "--cloud", cloud, "--json")
    assert text.code == 0 and js.code == 0, text.err + js.err
    return text, js.json()


@pytest.mark.parametrize("image,cloud,says", [
    (AR, "gcp", "image pull: VM identity (Artifact Registry / Container Registry, needs roles/artifactregistry.reader"),
    (ECR, "aws", "image pull: VM identity (ECR, needs ecr:GetAuthorizationToken, and ecr:BatchGetImage and "
                 "ecr:GetDownloadUrlForLayer"),
    (ACR, "azure", "image pull: VM identity (ACR, needs AcrPull on the registry for the VM's managed identity)"),
])
def test_the_vms_own_cloud_registry_is_pulled_with_its_identity(cli, write_yaml, image, cloud, says):
    text, doc = plan(cli, write_yaml, profile(image), cloud)
    assert says in " ".join(text.out.split())
    assert doc["image_pull"]["method"] == "identity" and doc["image_pull"]["warning"] is None
    assert not any("cannot log in" in w for w in doc["warnings"])


def test_a_public_registry_is_anonymous_without_a_warning(cli, write_yaml):
    text, doc = plan(cli, write_yaml, profile(NGC), "gcp")
    assert "image pull: anonymous (nvcr.io: public images only; a private repository needs stack.container.registry_auth)" \
        in " ".join(text.out.split())
    assert doc["image_pull"] == {"registry": "nvcr.io", "method": "anonymous", "login": None, "secret": None,
                                 "warning": None, "text": doc["image_pull"]["text"]}
    assert not any("log in" in w for w in doc["warnings"])


@pytest.mark.parametrize("image,cloud,host", [
    (ECR, "gcp", "123456789012.dkr.ecr.us-east-1.amazonaws.com"),
    (AR, "azure", "us-docker.pkg.dev"),
    (ACR, "aws", "myteamregistry.azurecr.io"),
])
def test_another_clouds_registry_without_a_secret_warns(cli, write_yaml, image, cloud, host):
    text, doc = plan(cli, write_yaml, profile(image), cloud)
    assert f"the VM cannot log in to {host}" in " ".join(text.err.split())
    assert any(f"the VM cannot log in to {host}" in w for w in doc["warnings"])
    assert doc["image_pull"]["method"] == "anonymous" and host in doc["image_pull"]["warning"]


def test_a_secret_reference_is_the_login_and_rules_out_clouds_that_cannot_read_it(cli, write_yaml):
    doc = profile(NGC, registry_auth="secret://gcp/ngc-api-key")
    text, js = plan(cli, write_yaml, doc, "gcp")
    assert "image pull: secret://gcp/ngc-api-key (read on the VM with its identity; nvcr.io)" in " ".join(text.out.split())
    assert js["image_pull"]["method"] == "secret" and js["image_pull"]["secret"] == "secret://gcp/ngc-api-key"
    # a VM on aws cannot read Secret Manager: the plan rules aws out (the same rule as stack.env secrets)
    r = cli("plan", str(write_yaml(doc)), "--cloud", "aws", "--json")
    assert r.code == 1 and "stack.container.registry_auth" in r.out


def test_a_secret_value_instead_of_a_reference_is_a_located_error(cli, write_yaml):
    r = cli("validate", str(write_yaml(profile(NGC, registry_auth="user:hunter2-password"))), "--json")
    err = r.json()["results"][0]["errors"][0]
    assert r.code == 1 and err["path"] == "stack.container.registry_auth" and err["line"]
    assert "is not a secret reference" in err["message"]


def test_a_loopback_registry_still_warns_that_the_vm_cannot_reach_it(cli, write_yaml):
    text, doc = plan(cli, write_yaml, profile(f"127.0.0.1:5000/team/train:1@{DIGEST}"), "gcp")
    assert any("127.0.0.1:5000 is this workstation's loopback address" in w for w in doc["warnings"])
    assert doc["image_pull"]["method"] == "anonymous" and not any("cannot log in" in w for w in doc["warnings"])
