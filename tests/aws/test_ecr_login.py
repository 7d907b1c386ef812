"""The VM's ECR login (the helper's ``registry-login ecr HOST REGION``, templates/files/trainvm_helper.py): ECR
``GetAuthorizationToken`` through the helper's own boto3 program with the instance profile, against moto's server with
its SigV4 checks on, the token decoded into the private docker config the pull reads. The role holds exactly the
statements trainvm adds for an ECR image (providers/registry_auth.py ``ecr_statements``).

Not modelled by moto: the token is not checked by any registry here (moto serves no /v2/ API), and moto does not
evaluate ECR's resource-level permissions (BatchGetImage on the repository ARN): the statements' shape is checked
here, their effect only by IAM's PutRolePolicy validation."""

from __future__ import annotations

import base64
import json

from tests.aws.conftest import role_credentials
from tests.aws.test_ec2_call import helper, imds, vm  # noqa: F401 (fixtures)

HOST = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
IMAGE = f"{HOST}/team/train:1@sha256:" + "d" * 64


def test_the_helper_writes_a_docker_config_from_ecr_get_authorization_token(aws, helper, vm, moto_auth, monkeypatch, tmp_path):  # noqa: F811
    from provisioner.container.reference import parse_image_ref
    from provisioner.providers.registry_auth import ecr_statements

    _, meta = vm
    statements = ecr_statements(parse_image_ref(IMAGE), None)
    assert statements == [
        {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        {"Effect": "Allow", "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
         "Resource": "arn:aws:ecr:us-east-1:123456789012:repository/team/train"}]
    assert ecr_statements(parse_image_ref(IMAGE), "secret://aws/ecr-user") == []  # a secret logs in instead: no ECR statements
    moto_auth.off()
    keys = role_credentials(aws, "trainvm-ecr", {"Version": "2012-10-17", "Statement": statements})
    meta["iam/security-credentials/trainvm-vm"] = json.dumps(keys)
    moto_auth.on()
    monkeypatch.setenv("AWS_ENDPOINT_URL_ECR", aws.moto_url)
    monkeypatch.setattr(helper, "REGISTRY_AUTH", str(tmp_path / "registry-auth"))
    assert helper.registry_login("ecr", HOST, "us-east-1") == 0
    config = tmp_path / "registry-auth" / "config.json"
    assert config.stat().st_mode & 0o777 == 0o600 and (tmp_path / "registry-auth").stat().st_mode & 0o777 == 0o700
    auth = json.loads(config.read_text())["auths"][HOST]["auth"]
    user, _, password = base64.b64decode(auth).decode().partition(":")
    assert user == "AWS" and password  # ECR's token: base64 of AWS:PASSWORD
    assert password in helper.registry_hidden() and auth in helper.registry_hidden()  # redacted while it exists


def test_a_refused_call_is_a_failure_naming_the_error_code_only(aws, helper, vm, moto_auth, monkeypatch, tmp_path, capsys):  # noqa: F811
    _, meta = vm
    meta["iam/security-credentials/trainvm-vm"] = json.dumps({**json.loads(meta["iam/security-credentials/trainvm-vm"]),
                                                              "SecretAccessKey": "x" * 40})
    monkeypatch.setenv("AWS_ENDPOINT_URL_ECR", aws.moto_url)
    monkeypatch.setattr(helper, "REGISTRY_AUTH", str(tmp_path / "registry-auth"))
    assert helper.registry_login("ecr", HOST, "us-east-1") == 1
    err = capsys.readouterr().err
    assert "registry-login: ECR GetAuthorizationToken failed: 40" in err and "x" * 40 not in err
    assert not (tmp_path / "registry-auth").exists()
