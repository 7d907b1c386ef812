"""The bootstrap: what every cloud's user data holds. It names one payload (render/payload.py) by its
sha256 and where it is staged (providers/store.py ``PayloadRef``), fetches it with the VM's own identity
(``templates/bootstrap/fetch-<cloud>.sh``), refuses anything else and runs it.

Its size does not depend on the profile (lock, packages, data, containers, perf): only on the store URL.
``check_fits`` still compares it with the cloud's limit (registry ``UserDataFormat``) so that a change to
the bootstrap that broke a limit fails at render time, not at create time.
"""

from __future__ import annotations

import base64
import gzip
from dataclasses import dataclass, replace

from packaging.version import Version

from provisioner.bundled import templates_dir
from provisioner.errors import RenderError
from provisioner.providers.registry import CLOUDS, UserDataEncoding
from provisioner.providers.store import PayloadRef, payload_key
from provisioner.render.shell import template_env


@dataclass(frozen=True)
class UserData:
    """The bootstrap as the cloud receives it (before any base64 the API wants)."""

    text: str
    encoding: UserDataEncoding  # "plain" (GCE metadata value, EC2 via boto3) or "base64" (Azure customData)
    ref: PayloadRef

    def request_value(self) -> str:
        """The string that goes into the create request's field (base64 where the API wants it)."""
        if self.encoding == "base64":
            return base64.b64encode(self.text.encode("utf-8")).decode("ascii")
        return self.text

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8"))

    @property
    def gzip_size(self) -> int:
        return len(gzip.compress(self.text.encode("utf-8"), compresslevel=9, mtime=0))


def fetch_code(cloud: str) -> str:
    """``templates/bootstrap/fetch-<cloud>.sh``: the cloud's ``tv_fetch URL OUT`` (its README has the contract)."""
    return (templates_dir() / "bootstrap" / f"fetch-{cloud}.sh").read_text(encoding="utf-8").rstrip("\n")


#: the curl each OS image ships (Ubuntu jammy-updates 7.81.0-1ubuntu1.x, noble 8.5.0-2ubuntu10.x, Debian bookworm
#: 7.88.1-10+deb12u*: the distributions' package pages). curl's --aws-sigv4 signs the x-amz-* headers it is given
#: (the session token) only since 7.86.0 (curl PR #7966); before, its SignedHeaders are host;x-amz-date alone.
IMAGE_CURL = {"ubuntu-22.04": "7.81.0", "ubuntu-24.04": "8.5.0", "debian-12": "7.88.1"}
CURL_SIGNS_HEADERS = "7.86.0"


def needs_signed_url(os_name: str) -> bool:
    """The OS image's curl cannot sign an identity request that carries a session token (Ubuntu 22.04)."""
    return Version(IMAGE_CURL.get(os_name, "0")) < Version(CURL_SIGNS_HEADERS)


def render_bootstrap(ref: PayloadRef, profile_hash: str, os_name: str) -> UserData:
    """The bootstrap for the payload ``ref`` (pure: no cloud call), checked against the cloud's user-data limit.
    ``ref.signed_url`` goes into it only for an OS image whose curl cannot sign the identity request
    (``needs_signed_url``): everywhere else the VM's identity alone reads the payload."""
    spec = CLOUDS[ref.cloud]
    store = spec.payload
    if ref.signed_url and not needs_signed_url(os_name):
        ref = replace(ref, signed_url="")
    text = template_env().get_template("bootstrap/bootstrap.sh.j2").render(
        ref=ref, store_title=store.title, cloud=ref.cloud, profile_hash=profile_hash,
        metadata_url=store.metadata_url, fetch=fetch_code(ref.cloud),
    )
    fmt = spec.user_data
    size = len(text.encode("utf-8"))
    measured = len(base64.b64encode(text.encode("utf-8"))) if fmt.limit_unit.startswith("base64") else size
    if measured > fmt.limit:  # a bootstrap is ~4 KB: only a broken template or an absurd URL gets here
        raise RenderError(f"the bootstrap is {measured:,} {fmt.limit_unit}; {spec.title} user data holds at most {fmt.limit:,}")
    return UserData(text=text, encoding=fmt.encoding, ref=ref)


def preview_ref(cloud: str, region: str, sha256: str, size: int) -> PayloadRef:
    """The PayloadRef ``up`` would stage, as far as it is known offline (``plan``, ``render``): the account part
    of the store's name is a placeholder until ``up`` asks the cloud (registry ``PayloadStoreFacts.where``)."""
    store = CLOUDS[cloud].payload
    key = payload_key(sha256)
    url = store.url.format(region=region, key=key, key_quoted=key.replace("/", "%2F"))
    return PayloadRef(cloud=cloud, region=region, store=store.name.format(region=region), key=key, url=url,
                      sha256=sha256, size=size, access=store.access)
