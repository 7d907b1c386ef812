"""Platform size limits are checked at render time: GCE <= 256 KiB per metadata value; Azure
customData <= 87,380 base64 characters (gzip when needed); AWS <= 16 KB raw (the script, the
gzipped script, or a bootstrap that downloads it)."""

from __future__ import annotations

import base64
import gzip
import hashlib

import pytest
import trainvm_render_support as S
from ruamel.yaml import YAML

from provisioner.errors import RenderError
from provisioner.providers.registry import cloud
from provisioner.render import render_script

GCE_LIMIT, AZURE_LIMIT, AWS_LIMIT = (cloud(c).user_data.limit for c in ("gcp", "azure", "aws"))


@pytest.mark.parametrize("path", S.EXAMPLES, ids=lambda p: p.stem)
def test_example_profiles_fit_every_cloud(path):
    lp = S.loaded(path)
    gce, azure, aws = (S.render(lp, c) for c in S.CLOUDS)
    assert gce.sizes["user_data"] == gce.sizes["startup_sh"] <= GCE_LIMIT
    assert azure.sizes["custom_data_base64"] == len(azure.request_value()) <= AZURE_LIMIT
    assert aws.sizes["user_data"] <= AWS_LIMIT and aws.entry == "aws-gzip"
    assert gzip.decompress(aws.user_data).decode() == aws.startup_sh  # cloud-init un-gzips user data
    assert aws.request_value() == base64.b64encode(aws.user_data).decode()


def _lock(tmp_path, n_lines):
    lock = tmp_path / "requirements.lock"
    body = "".join(f"pkg{i:05d}==1.0.{i} \\\n    --hash=sha256:{hashlib.sha256(str(i).encode()).hexdigest()}\n" for i in range(n_lines))
    lock.write_text("torch==2.4.1+cu124 \\\n    --hash=sha256:" + "a" * 64 + "\n" + body)
    return lock


def _with_lock(tmp_path, n_lines):
    lock = _lock(tmp_path, n_lines)
    return S.from_dict(S.minimal_profile(requirements="requirements.lock"), path=tmp_path / "p.yaml", requirements=lock)


def test_azure_gzips_when_the_plain_document_is_too_big(tmp_path):
    lp = _with_lock(tmp_path, 300)  # ~45 KB of lock file
    rendered = S.render(lp, "azure")
    assert rendered.entry == "azure-cloud-init-gzip"
    assert rendered.sizes["custom_data_plain_base64"] > AZURE_LIMIT >= rendered.sizes["custom_data_base64"]
    item = YAML(typ="safe").load(rendered.user_data)["write_files"][0]
    assert item["encoding"] == "gz+b64"
    assert gzip.decompress(base64.b64decode(item["content"])).decode() == rendered.startup_sh


def test_aws_past_the_limit_needs_a_hosted_script_or_fails_clearly(tmp_path):
    lp = _with_lock(tmp_path, 300)
    with pytest.raises(RenderError, match=r"AWS user data would be [\d,]+ bytes even gzipped \(limit 16,384"):
        S.render(lp, "aws")
    url = "https://bucket.s3.amazonaws.com/startup.sh?X-Amz-Signature=abc"
    boot = render_script(lp, S.target_for("aws", lp), script_url=url)
    assert boot.entry == "aws-bootstrap" and boot.sizes["user_data"] < 2048
    assert hashlib.sha256(boot.startup_sh.encode()).hexdigest() in boot.user_data
    assert "'https://bucket.s3.amazonaws.com/startup.sh?X-Amz-Signature=abc'" in boot.user_data


def test_small_scripts_go_to_aws_as_they_are():
    from provisioner.render.script import _aws

    text, entry, _ = _aws("#!/bin/bash\necho hi\n", None, None, AWS_LIMIT)
    assert (text, entry) == ("#!/bin/bash\necho hi\n", "aws-script")


def test_gce_and_azure_refuse_past_their_limits(tmp_path):
    lp = _with_lock(tmp_path, 2200)  # ~300 KB of incompressible-ish lock file
    with pytest.raises(RenderError, match=r"GCE metadata value holds at most 262,144"):
        S.render(lp, "gcp")
    with pytest.raises(RenderError, match=r"Azure customData would be [\d,]+ base64 characters even with gzip"):
        S.render(lp, "azure")


def test_largest_example_sizes_are_recorded():
    lp = S.loaded(S.LARGEST_PROFILE)
    sizes = {c: S.render(lp, c).sizes for c in S.CLOUDS}
    # GCE takes 256 KiB per metadata value; this bound only catches runaway growth (the gs:// copy tool, its
    # lock and the readable copier, added 9.7 KB in issue 10)
    assert sizes["gcp"]["startup_sh"] < 72 * 1024
    assert sizes["aws"]["user_data"] <= AWS_LIMIT
    print({c: s for c, s in sizes.items()})
