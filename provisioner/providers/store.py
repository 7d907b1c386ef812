"""The payload store contract: where a VM's provisioning payload lives before the VM fetches it.

User data on every cloud is a small bootstrap (render/bootstrap.py) holding the payload's sha256 and its
``PayloadRef.url``. The payload itself (render/payload.py: the startup script, the agent, the manifest) is an
object in the cloud's own object store, private, read by the VM with its own identity:

* GCE: a GCS bucket per project and region; the VM's service account reads it with a metadata-server token
  (``storage.objects.get`` granted on the bucket).
* Azure: a storage account per subscription and region with a private container; the VM's managed identity
  reads it with an IMDS token (Storage Blob Data Reader on the container).
* AWS: an S3 bucket per account and region (Block Public Access on); the instance profile reads it with
  IMDSv2 role credentials, the request signed by curl's own ``--aws-sigv4``.

Objects are content-addressed (``payload_key``), so staging the same payload again uploads nothing and many
VMs share one object. A lifecycle rule on the store removes objects ``EXPIRE_DAYS`` after their last upload;
``stage`` uploads again an object older than ``REFRESH_DAYS`` so that a VM being created never meets an
object about to expire. ``trainvm down`` (and ``bake``, for its builder's) removes the object when no other trainvm
VM of that store uses it (the ``trainvm-payload`` label; ``release``); a failed ``up`` attempt removes only an object it created (``refreshed`` is not)
that no VM carries the label of. A VM keeps its verified copy on its boot disk: a restart fetches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from provisioner.errors import CloudError
from provisioner.providers.registry import CLOUDS

if TYPE_CHECKING:
    from provisioner.providers.base import InstanceRecord, Provider

#: the object-store lifecycle rule: payload objects are deleted this many days after their last upload
EXPIRE_DAYS = 30
#: ``stage`` uploads again an existing object older than this (so it outlives the VM's first boot)
REFRESH_DAYS = 7
#: label/tag on every VM: the first 16 hex of the sha256 of the payload it was created with
PAYLOAD_LABEL = "trainvm-payload"
#: the key prefix of every payload object in a store
PAYLOAD_PREFIX = "payloads/"


def payload_key(sha256: str) -> str:
    """The object key of a payload: content-addressed, so two VMs with the same payload share one object."""
    return f"{PAYLOAD_PREFIX}{sha256}.tar.gz"


@dataclass(frozen=True)
class PayloadRef:
    """One staged payload: what the bootstrap fetches and what ``down`` may release."""

    cloud: str
    region: str
    #: the store: a bucket (GCS, S3) or ``ACCOUNT/CONTAINER`` (Azure)
    store: str
    key: str  # payload_key(sha256)
    #: the https URL the VM GETs (with its identity's token or signature); an emulator's URL in tests
    url: str
    sha256: str
    size: int
    #: what the VM's identity needs to read it, in words ("roles/storage.objectViewer on gs://B")
    access: str = ""
    #: True when this ``stage`` uploaded the object (False: it was there and fresh)
    uploaded: bool = False
    #: True when the object was already there and this ``stage`` uploaded it again (older than ``REFRESH_DAYS``, or
    #: of another size): other VMs may use it, so a failed attempt must not delete it (only a new object is its own)
    refreshed: bool = False
    #: a short-lived URL signed by the cloud's SDK on the workstation, for a VM whose own tools cannot sign the
    #: identity request (AWS: Ubuntu 22.04's curl 7.81 does not sign the session-token header; fetch-aws.sh);
    #: it grants a GET of this one object, which holds no secret, until it expires. "" where none is needed
    signed_url: str = field(default="", repr=False)

    def where(self) -> str:
        """``gs://B/K``, ``s3://B/K`` or ``https://ACCOUNT.blob.core.windows.net/C/K`` as a user reads it."""
        return self.url


class PayloadStore(Protocol):
    """A cloud's payload store, through the cloud's own SDK (imported lazily by the provider)."""

    def stage(self, region: str, data: bytes, sha256: str) -> PayloadRef:
        """Create or reuse the region's store (private, labelled ``trainvm-managed``, with the lifecycle rule),
        make it readable by the identity trainvm's VMs run as where that is a store-level grant, and upload the
        payload under ``payload_key(sha256)`` unless an object of that key and size, younger than
        ``REFRESH_DAYS``, is already there. Idempotent. Raises a ``ProviderError`` (AuthError when the caller
        may not create or write the store) and leaves no half-written object (uploads are single requests or
        committed at the end)."""

    def release(self, region: str, sha256: str) -> bool:
        """Delete the payload object of ``sha256`` in the region's store; False when it was not there. The
        store itself is kept (it is shared by the account's VMs in that region)."""

    def stored(self, region: str) -> list[str]:
        """The sha256 of every payload object in the region's store ([] when there is no store)."""


def users(provider: Any, region: str, sha256: str, mine: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The trainvm VMs (cluster names for nodes) of ``provider``'s cloud in ``region`` that carry the
    ``PAYLOAD_LABEL`` of ``sha256``, leaving out those named in ``mine``; a listing error propagates."""
    prefix = sha256[:16]
    return list(dict.fromkeys(r.cluster or r.name for r in provider.list()
                              if r.payload == prefix and r.region == region and (r.cluster or r.name) not in mine))


def release(provider: Provider, cloud: str, region: str, sha256: str | None, mine: set[str] | frozenset[str]) -> dict[str, object]:
    """Delete the payload object of ``sha256`` (its ``PAYLOAD_LABEL`` prefix) from ``provider``'s store in ``region``
    when no trainvm VM of that store other than those named in ``mine`` carries its label: what ``down`` does for
    the VM it deleted and ``bake`` for its builder. Never raises a cloud error: it is reported (``state``: none,
    kept, released, gone or error; ``message`` says what happened, and what removes the object after an error)."""
    prefix = (sha256 or "")[:16]
    if not prefix:
        return {"state": "none", "sha256": None, "message": "no payload label (a VM of an older trainvm)"}
    try:
        others = users(provider, region, prefix, mine)
        if others:
            return {"state": "kept", "sha256": prefix, "users": others,
                    "message": f"kept: {len(others)} other VM(s) use it ({', '.join(others[:3])})"}
        store = provider.payload_store()
        released = [s for s in store.stored(region) if s.startswith(prefix) and store.release(region, s)]
    except CloudError as exc:
        facts = CLOUDS[cloud].payload
        after = (f"the store's lifecycle rule deletes it within {EXPIRE_DAYS} days" if facts.expires else
                 f"nothing removes it on its own ({facts.title}): remove it by hand")
        return {"state": "error", "sha256": prefix, "message": f"could not be removed ({exc}); {after}"}
    if not released:
        return {"state": "gone", "sha256": prefix, "message": "already gone from the store"}
    return {"state": "released", "sha256": prefix, "message": "removed from the store"}


def release_payload(provider: Provider, record: InstanceRecord, name: str) -> dict[str, object]:
    """``release`` of the payload ``record`` (a VM ``down`` deleted, called ``name``) was created with, leaving
    out the VM itself and its cluster."""
    return release(provider, record.cloud, record.region, record.payload, {name, record.cluster or name})


#: no object store lists a price above this per GB-month for its standard class (GCS, S3 and Blob hot tiers are
#: about $0.02); the cost line is an upper bound from it, not a price quote
MAX_STORAGE_USD_PER_GB_MONTH = 0.5


def describe(cloud: str, region: str, size: int | None = None) -> dict[str, object]:
    """Where ``up`` stages the payload on ``cloud`` in ``region``, who reads it and what it costs, for ``plan``
    and the ``up`` summary (offline: the account part of the store's name is a placeholder)."""
    facts = CLOUDS[cloud].payload
    bound = 0.0 if not facts.billed else None if size is None else MAX_STORAGE_USD_PER_GB_MONTH * size / 1e9
    kept = (f"removed by `trainvm down` when no other VM uses it, else after {EXPIRE_DAYS} days; the store is kept"
            if facts.expires else "kept until `trainvm down` of the last VM that uses it (nothing expires)")
    return {
        "store": facts.title, "where": facts.name.format(region=region), "access": facts.access, "reads": facts.reads,
        "size_bytes": size, "cost_monthly_at_most": bound, "expires_days": EXPIRE_DAYS if facts.expires else None,
        "kept": kept,
    }


def describe_line(d: dict[str, object]) -> str:
    size = d.get("size_bytes")
    bound = d.get("cost_monthly_at_most")
    size_text = f"{size / 1e6:.2f} MB" if isinstance(size, int) else "a few hundred KB"
    if bound == 0.0:  # a store that bills nothing (a folder on this machine)
        cost = f"{size_text}, no bill"
    elif isinstance(size, int) and isinstance(bound, float):
        cost = f"{size_text}, at most ${bound:.4f}/month"
    else:
        cost = "a few hundred KB, under $0.001/month"
    return f"private {d['store']} {d['where']} ({cost}), {d['reads']}; {d['kept']}"
