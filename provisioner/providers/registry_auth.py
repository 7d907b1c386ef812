"""How a VM authenticates to the registry of ``stack.container.image``: decided once, at plan/render time, pure and
offline (no SDK, no network). ``plan`` shows it ("image pull: ..."), the startup script does it
(render/container.py, templates/phases/_container.sh.j2, the helper's ``registry-login``).

1. ``stack.container.registry_auth: secret://...``: the secret (``user:password``, or a token sent with the user
   ``$oauthtoken``, NGC's convention) is read on the VM with its identity, as the env phase reads ``stack.env``
   secrets. Any registry (nvcr.io, GHCR, Docker Hub, a private one).
2. Else, a registry of the VM's own cloud (``CloudSpec.registry_login``): the VM's identity. GCE Artifact Registry
   and Container Registry: the metadata server's access token as the password of ``oauth2accesstoken`` (GCP,
   "Configure authentication to Artifact Registry for Docker: access token"); ECR: ``GetAuthorizationToken``
   through boto3 (AWS ECR user guide, "Private registry authentication"); ACR: an IMDS token for
   ``https://management.azure.com/`` exchanged at ``https://REGISTRY/oauth2/exchange`` for an ACR refresh token,
   the password of user ``00000000-0000-0000-0000-000000000000`` (github.com/Azure/acr docs/AAD-OAuth.md).
3. Else anonymous: public images. A registry of another cloud (private unless made public there) gets a warning:
   the VM cannot log in to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from provisioner.providers.registry import CLOUDS

if TYPE_CHECKING:
    from provisioner.container.reference import ImageRef
    from provisioner.profile.model import Profile

#: the on-VM login of each method ("" for anonymous)
Login = Literal["", "gcp-token", "ecr", "acr", "secret"]


@dataclass(frozen=True)
class PullAuth:
    registry: str  # host[:port] of the image
    method: Literal["anonymous", "identity", "secret"]
    login: Login
    text: str  # what `plan` says after "image pull: "
    secret: str = ""  # the secret:// reference (method "secret")
    region: str = ""  # ECR: the registry's region (GetAuthorizationToken is regional)
    warning: str = ""  # the VM cannot log in to the registry

    def to_json(self) -> dict[str, Any]:
        return {"registry": self.registry, "method": self.method, "login": self.login or None, "text": self.text,
                "secret": self.secret or None, "warning": self.warning or None}


def _own(cloud: str, host: str) -> Any:
    login = CLOUDS[cloud].registry_login
    return login if login is not None and re.fullmatch(login.hosts, host) else None


def pull_auth(cloud: str, image: ImageRef, secret: str | None) -> PullAuth:
    """How a VM on ``cloud`` logs in to the registry of ``image`` (parsed: the profile's record holds it, as
    ``LoadedProfile.resolved.image``; ``secret``: stack.container.registry_auth)."""
    host = image.registry
    if secret:
        return PullAuth(host, "secret", "secret", f"{secret} (read on the VM with its identity; {host})", secret=secret)
    own = _own(cloud, host)
    if own is not None:
        region = ""
        if own.login == "ecr":
            region = host.split(".")[3]  # ACCOUNT.dkr.ecr[-fips].REGION.amazonaws.com
        return PullAuth(host, "identity", own.login, f"VM identity ({own.title}, needs {own.needs})", region=region)
    other = next((CLOUDS[c].registry_login for c in CLOUDS if c != cloud and _own(c, host) is not None), None)
    if other is not None:
        return PullAuth(host, "anonymous", "", f"anonymous ({host})",
                        warning=(f"the VM cannot log in to {host} ({other.title}, another cloud's registry: private unless "
                                 f"made public there); set stack.container.registry_auth to a secret:// reference that a "
                                 f"VM on {cloud} reads, or push the image to this cloud's registry"))
    return PullAuth(host, "anonymous", "", f"anonymous ({host}: public images only; a private repository needs "
                                           "stack.container.registry_auth)")


def profile_pull_auth(profile: Profile, cloud: str, image: ImageRef | None) -> PullAuth | None:
    """``pull_auth`` of a profile (None without stack.container); ``image``: the reference as the profile's record
    parsed it once (``LoadedProfile.resolved.image``), never parsed again here."""
    container = profile.stack.container
    if container is None or image is None:
        return None
    return pull_auth(cloud, image, container.registry_auth)


def ecr_statements(image: ImageRef | None, secret: str | None) -> list[dict[str, Any]]:
    """The instance profile's statements for an ECR image pulled with the VM's identity (``image``: the parsed
    reference, ``LaunchSpec.image``): GetAuthorizationToken (it takes no resource: "*") and the two reads of a pull
    on exactly that repository (AWS ECR user guide, "Private repository policies": the actions docker pull needs)."""
    if image is None or secret:
        return []
    ref = image
    if _own("aws", ref.registry) is None:
        return []
    parts = ref.registry.split(".")
    account, region = parts[0], parts[3]
    return [
        {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
        {"Effect": "Allow", "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
         "Resource": f"arn:aws:ecr:{region}:{account}:repository/{ref.repository}"},
    ]
