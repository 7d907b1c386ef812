"""User data is the bootstrap on every cloud (render/bootstrap.py): its size does not depend on the profile
(lock, package count, data items, perf probe, containers), only on the store URL, and it fits every cloud's
limit with room to spare; the script with everything the profile needs travels in the payload, whatever its
size (no cloud limit applies to it)."""

from __future__ import annotations

import base64
import gzip
import hashlib

import pytest
import trainvm_render_support as S

from provisioner.providers.registry import cloud
from provisioner.providers.store import PayloadRef, payload_key
from provisioner.render.payload import unpack

AIM_GZIP = 4096  # the aim for the bootstrap, gzipped


def _ref(rendered, url: str | None = None) -> PayloadRef:
    sha = rendered.payload.sha256
    return PayloadRef(cloud=rendered.cloud, region=rendered.region, store="b", key=payload_key(sha),
                      url=url or f"https://store.example/{payload_key(sha)}", sha256=sha, size=rendered.payload.size)


@pytest.mark.parametrize("path", S.EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("cloud_name", S.CLOUDS)
def test_every_example_fits_every_cloud_as_a_small_bootstrap(path, cloud_name):
    rendered = S.render(S.loaded(path), cloud_name)
    boot = rendered.user_data(_ref(rendered))
    limit = cloud(cloud_name).user_data.limit
    assert boot.gzip_size <= AIM_GZIP
    assert (len(boot.request_value()) if boot.encoding == "base64" and cloud_name == "azure" else boot.size) <= limit
    assert rendered.payload.sha256 in boot.text and boot.text.startswith("#!/bin/bash\n")
    files = unpack(rendered.payload.data)
    assert files["startup.sh"].decode() == rendered.startup_sh
    assert hashlib.sha256(rendered.payload.data).hexdigest() == rendered.payload.sha256
    if boot.encoding == "base64":
        assert base64.b64decode(boot.request_value()).decode() == boot.text


def _lock(tmp_path, n_lines):
    lock = tmp_path / "requirements.lock"
    body = "".join(f"pkg{i:05d}==1.0.{i} \\\n    --hash=sha256:{hashlib.sha256(str(i).encode()).hexdigest()}\n" for i in range(n_lines))
    lock.write_text("torch==2.4.1+cu124 \\\n    --hash=sha256:" + "a" * 64 + "\n" + body)
    return lock


def _with_lock(tmp_path, n_lines):
    lock = _lock(tmp_path, n_lines)
    return S.from_dict(S.minimal_profile(requirements="requirements.lock"), path=tmp_path / "p.yaml", requirements=lock)


@pytest.mark.parametrize("cloud_name", S.CLOUDS)
def test_the_bootstrap_does_not_grow_with_the_lock(tmp_path, cloud_name):
    """A 2,200-line lock (~300 KB: past GCE's 256 KiB metadata value, Azure's 64 KiB and AWS's 16 KB) renders on
    every cloud; the bootstrap has exactly the size it has for a 10-line lock (same URL length), the payload holds it."""
    small, big = (S.render(_with_lock(tmp_path / str(n), n), cloud_name) for n in (10, 2200) if (tmp_path / str(n)).mkdir() is None)
    url = "https://store.example/" + "x" * 80
    assert small.user_data(_ref(small, url)).size == big.user_data(_ref(big, url)).size
    assert len(big.startup_sh.encode()) > 262_144
    assert "pkg02199==1.0.2199" in unpack(big.payload.data)["startup.sh"].decode()


def test_the_payload_is_reproducible_and_content_addressed():
    lp = S.loaded(S.EXAMPLES[0])
    one, two = S.render(lp, "gcp"), S.render(lp, "gcp")
    assert one.payload.data == two.payload.data and one.payload.sha256 == two.payload.sha256
    assert S.render(lp, "aws").payload.sha256 != one.payload.sha256  # another cloud, another script
    assert gzip.decompress(one.payload.data)[:512].count(b"\0") > 0  # a tar inside the gzip


def test_a_staged_payload_must_be_the_rendered_one():
    from provisioner.errors import RenderError

    lp = S.loaded(S.EXAMPLES[0])
    rendered = S.render(lp, "gcp")
    ref = _ref(rendered)
    wrong = PayloadRef(**{**ref.__dict__, "sha256": "0" * 64})
    with pytest.raises(RenderError, match="is not the rendered one"):
        rendered.user_data(wrong)
