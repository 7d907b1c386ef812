"""Google Cloud credentials and project for ``GcpProvider``: ``google.auth.default()`` and ``GOOGLE_CLOUD_PROJECT``.

Off GCE (``host.probe_metadata("gcp")`` false: the DMI does not say Google and ``TRAINVM_METADATA_PROBE`` is not
``always``) ``google.auth.default`` gets a transport (its public ``request`` argument, "used to detect whether the
application is running on Compute Engine") that answers a request for the metadata server at once with 404 and no
``Metadata-Flavor`` header, as a host that is not a metadata server would: no packet leaves for 169.254.169.254,
so a command without credentials fails in milliseconds instead of the ping's 3 x 3 s. Every other request (an
external-account file's token exchange, its project lookup) goes to google-auth's own requests transport.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from provisioner.errors import CredentialsError
from provisioner.providers.host import probe_metadata

if TYPE_CHECKING:
    from google.auth.credentials import Credentials
    from google.auth.transport import Request as Transport
    from google.auth.transport import Response
else:
    Transport = object  # google.auth's transport interface (a call), named for mypy only: no import until a call

COMPUTE_SCOPE = "https://www.googleapis.com/auth/compute"
METADATA_HOSTS = ("169.254.169.254", "metadata.google.internal", "metadata")


class _NotMetadataServer:
    status = 404
    headers: dict[str, str] = {}
    data = b""


class OffCloudRequest(Transport):
    """A google.auth transport Request that never reaches a metadata server (see the module doc)."""

    def __init__(self) -> None:
        import google.auth.transport.requests

        self._real = google.auth.transport.requests.Request()
        env = (os.environ.get(k, "") for k in ("GCE_METADATA_IP", "GCE_METADATA_HOST", "GCE_METADATA_ROOT"))
        self._hosts = {*METADATA_HOSTS, *(h for h in env if h)}

    def __call__(self, url: str, method: str = "GET", body: bytes | None = None,
                 headers: Mapping[str, str] | None = None, timeout: float | None = None,
                 **kwargs: object) -> Response | _NotMetadataServer:
        if urlsplit(url).netloc in self._hosts:
            return _NotMetadataServer()
        got: Response = self._real(url, method=method, body=body, headers=headers, timeout=timeout, **kwargs)
        return got


def default_credentials(project: str | None) -> tuple[Credentials, str]:
    """(credentials, project) from google.auth's default chain; CredentialsError when there are none."""
    import google.auth
    import google.auth.exceptions

    request = None if probe_metadata("gcp") else OffCloudRequest()
    try:
        creds, default_project = google.auth.default(scopes=[COMPUTE_SCOPE], request=request)
    except google.auth.exceptions.GoogleAuthError as exc:
        raise CredentialsError(
            f"no Google Cloud credentials found ({exc})",
            hint="run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS "
                 "to a service-account key file (on a GCE VM whose DMI is hidden: TRAINVM_METADATA_PROBE=always)"
        ) from None
    project = project or default_project
    if not project:
        raise CredentialsError("no Google Cloud project is set",
                               hint="export GOOGLE_CLOUD_PROJECT=<project id> (or `gcloud config set project`)")
    return creds, project
