"""Azure settings, credentials and management clients for ``AzureProvider`` (SDKs imported on first use).

- ``AZURE_SUBSCRIPTION_ID`` is required (``CredentialsError``, a CloudError: exit 3).
- Credentials: ``TRAINVM_AZURE_ACCESS_TOKEN`` (a static bearer token, ``StaticTokenCredential``) or
  ``azure.identity.DefaultAzureCredential`` (without ManagedIdentityCredential off Azure: ``host.probe_metadata``).
- ``TRAINVM_AZURE_ENDPOINT``: another ARM base URL (an emulator in tests). https only: azure-core refuses
  bearer tokens over http (trap A1). The token scope stays ``https://management.azure.com/.default``; the CA
  comes from ``REQUESTS_CA_BUNDLE`` (passed on as ``connection_verify`` when set).
- ``polling_interval``: ``TRAINVM_AZURE_POLL_SECONDS`` (default 5; ARM's own default is 30 s, trap A2).
- Bounded calls: every HTTP request has connect/read timeouts of half of ``TRAINVM_API_TIMEOUT`` (default
  30 s), and azure-core's RetryPolicy gives up once a call has taken ``TRAINVM_API_TIMEOUT`` in all.
- Retries: azure-core's RetryPolicy (429/5xx/connection errors, honours Retry-After), ``retry_total`` times,
  backoff factor ``TRAINVM_RETRY_BASE_DELAY`` (default 0.8, the SDK's).
- Resource-provider auto-registration is OFF (trap A8). The generated clients hard-wire
  ``ARMAutoResourceProviderRegistrationPolicy``; when ARM answers 409 ``MissingSubscriptionRegistration``
  it POSTs ``/register`` and then polls with ``time.sleep(10)`` in a ``while True`` loop, no upper bound
  (azure-mgmt-core 1.6). The only public switch is the clients' ``policies=`` keyword, so each client gets
  the generated default list minus that policy (``policies()``). An unregistered namespace then fails at
  once as ``MissingSubscriptionRegistration`` with the ``az provider register`` hint (azure_errors).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, TypedDict, Unpack, cast

from provisioner import settings
from provisioner.errors import CredentialsError
from provisioner.providers.azure.sdk import MgmtClients
from provisioner.providers.host import probe_metadata
from provisioner.settings import env_seconds

if TYPE_CHECKING:
    from azure.core.credentials import AccessToken, AccessTokenInfo, TokenCredential

    from provisioner.providers.azure.sdk import Authorization, Compute, Network, Resource, Storage

ARM_SCOPE = "https://management.azure.com/.default"


class StaticTokenCredential:
    """``TRAINVM_AZURE_ACCESS_TOKEN`` as an azure-core TokenCredential (never refreshes, never calls out)."""

    def __init__(self, token: str, lifetime: int = 3600) -> None:
        self.token, self.lifetime = token, lifetime

    def get_token(self, *scopes: str, claims: str | None = None, tenant_id: str | None = None,
                  enable_cae: bool = False, **kwargs: object) -> AccessToken:
        from azure.core.credentials import AccessToken

        return AccessToken(self.token, int(time.time()) + self.lifetime)

    def get_token_info(self, *scopes: str, options: object = None) -> AccessTokenInfo:  # azure-core >= 1.31 prefers this
        from azure.core.credentials import AccessTokenInfo

        return AccessTokenInfo(self.token, int(time.time()) + self.lifetime, token_type="Bearer")

    def close(self) -> None:
        pass

    def __enter__(self) -> StaticTokenCredential:
        return self

    def __exit__(self, *exc: object) -> None:
        pass




@dataclass(frozen=True)
class Settings:
    subscription_id: str
    endpoint: str  # "" = public Azure
    poll_seconds: float
    op_timeout: float
    retry_total: int
    retry_backoff: float
    call_timeout: float = 30.0

    @classmethod
    def from_env(cls, *, subscription_id: str | None = None, endpoint: str | None = None, poll_seconds: float | None = None,
                 op_timeout: float | None = None, retry_total: int = 6, retry_backoff: float | None = None) -> Settings:
        sub = subscription_id or os.environ.get("AZURE_SUBSCRIPTION_ID", "").strip()
        if not sub:
            raise CredentialsError("AZURE_SUBSCRIPTION_ID is not set",
                                        hint="export AZURE_SUBSCRIPTION_ID=$(az account show --query id -o tsv) "
                                             "after `az login`")
        url = (endpoint if endpoint is not None else settings.text("TRAINVM_AZURE_ENDPOINT")).strip().rstrip("/")
        if url and not url.startswith("https://"):
            raise CredentialsError(f"TRAINVM_AZURE_ENDPOINT={url!r} must be an https:// URL "
                                        "(the Azure SDKs never send a bearer token over plain http)")
        return cls(sub, url,
                   poll_seconds if poll_seconds is not None else env_seconds("TRAINVM_AZURE_POLL_SECONDS", 5.0),
                   op_timeout if op_timeout is not None else env_seconds("TRAINVM_AZURE_OP_TIMEOUT", 900.0),
                   retry_total,
                   retry_backoff if retry_backoff is not None else env_seconds("TRAINVM_RETRY_BASE_DELAY", 0.8),
                   env_seconds("TRAINVM_API_TIMEOUT", 30.0))


def default_credential() -> TokenCredential:
    token = settings.text("TRAINVM_AZURE_ACCESS_TOKEN")
    if token:
        return StaticTokenCredential(token)
    from azure.identity import DefaultAzureCredential

    # Off Azure (host.probe_metadata), ManagedIdentityCredential's IMDS probe only costs time (1 s where packets
    # to 169.254.169.254 are dropped); an explicit AZURE_TOKEN_CREDENTIALS choice is the user's and wins.
    off_azure = not probe_metadata("azure") and not os.environ.get("AZURE_TOKEN_CREDENTIALS")
    return DefaultAzureCredential(**({"exclude_managed_identity_credential": True} if off_azure else {}))


class ClientKwargs(TypedDict, total=False):
    """The keywords every management client (and each policy of its pipeline) gets: ``_client_kwargs``."""

    credential_scopes: list[str]
    polling_interval: float
    retry_total: int
    retry_backoff_factor: float
    connection_timeout: float
    read_timeout: float
    base_url: str
    connection_verify: str


class _PolicyKwargs(ClientKwargs, total=False):
    sdk_moniker: str
    user_agent: str


def policies(credential: TokenCredential, moniker: str, call_timeout: float,
             **client_kw: Unpack[ClientKwargs]) -> list[object]:
    """The generated clients' default pipeline, in their order, without the auto-registration policy (A8); its
    RetryPolicy stops once a call has used ``call_timeout`` (``Settings.call_timeout``: no default, so that no client
    is built without it)."""
    from azure.core.pipeline import policies as p
    from azure.mgmt.core.policies import ARMChallengeAuthenticationPolicy, ARMHttpLoggingPolicy

    kw: _PolicyKwargs = {**client_kw, "sdk_moniker": moniker, "user_agent": "trainvm"}
    return [p.RequestIdPolicy(**kw), p.HeadersPolicy(**kw), p.UserAgentPolicy(**kw), p.ProxyPolicy(**kw),
            p.ContentDecodePolicy(**kw), p.RedirectPolicy(**kw), p.RetryPolicy(**kw, timeout=call_timeout),
            ARMChallengeAuthenticationPolicy(credential, ARM_SCOPE, **kw), p.CustomHookPolicy(**kw),
            p.NetworkTraceLoggingPolicy(**kw), p.DistributedTracingPolicy(**kw), p.SensitiveHeaderCleanupPolicy(**kw),
            ARMHttpLoggingPolicy(**kw)]


def _client_kwargs(settings: Settings) -> ClientKwargs:
    """What every management client gets: scope, polling, retries, endpoint and CA bundle."""
    kw: ClientKwargs = {"credential_scopes": [ARM_SCOPE], "polling_interval": settings.poll_seconds,
                          "retry_total": settings.retry_total, "retry_backoff_factor": settings.retry_backoff,
                          "connection_timeout": max(0.5, settings.call_timeout / 2),
                          "read_timeout": max(0.5, settings.call_timeout / 2)}
    if settings.endpoint:
        kw["base_url"] = settings.endpoint
    if os.environ.get("REQUESTS_CA_BUNDLE"):
        kw["connection_verify"] = os.environ["REQUESTS_CA_BUNDLE"]
    return kw


def make_clients(settings: Settings, credential: TokenCredential) -> MgmtClients:
    """``.resource`` / ``.network`` / ``.compute`` management clients sharing one credential, as the Protocols of
    ``azure_sdk`` (the typed adapter: the SDK's classes stop here)."""
    import azure.mgmt.compute as compute
    import azure.mgmt.network as network
    import azure.mgmt.resource.resources as resources  # trap A6: `from azure.mgmt.resource import ...` fails in v26

    kw = _client_kwargs(settings)

    def pipeline(module: ModuleType, moniker: str) -> list[object]:
        return policies(credential, f"mgmt-{moniker}/{getattr(module, '__version__', '')}", settings.call_timeout, **kw)

    sub = settings.subscription_id
    return MgmtClients(
        resource=cast("Resource", resources.ResourceManagementClient(
            credential, sub, policies=pipeline(resources, "resource"), **kw)),
        network=cast("Network", network.NetworkManagementClient(
            credential, sub, policies=pipeline(network, "network"), **kw)),
        compute=cast("Compute", compute.ComputeManagementClient(
            credential, sub, policies=pipeline(compute, "compute"), **kw)))


def make_authorization_client(settings: Settings, credential: TokenCredential) -> Authorization:
    """azure-mgmt-authorization's client (role assignments), imported only when a VM needs one."""
    import azure.mgmt.authorization as authorization

    kw = _client_kwargs(settings)
    pipeline = policies(credential, f"mgmt-authorization/{getattr(authorization, '__version__', '')}",
                        settings.call_timeout, **kw)
    return cast("Authorization", authorization.AuthorizationManagementClient(
        credential, settings.subscription_id, policies=pipeline, **kw))


def make_storage_client(settings: Settings, credential: TokenCredential) -> Storage:
    """azure-mgmt-storage's client (the payload store's account, container, keys and lifecycle policy), imported
    only when a payload is staged or released."""
    import azure.mgmt.storage as storage

    kw = _client_kwargs(settings)
    pipeline = policies(credential, f"mgmt-storage/{getattr(storage, '__version__', '')}", settings.call_timeout, **kw)
    return cast("Storage", storage.StorageManagementClient(credential, settings.subscription_id, policies=pipeline, **kw))
