"""`shellcheck -S warning` is clean on every rendered variant: each OS x each cloud, and every
example profile on each cloud (one shellcheck run over all files, two parallel batches)."""

from __future__ import annotations

import trainvm_render_support as S

from provisioner.render import RenderTarget


def _variants():
    """(label, LoadedProfile, cloud): every example profile on every cloud (the examples run
    ubuntu-22.04 and ubuntu-24.04), plus the golden profile on debian-12 on every cloud, so
    every OS x cloud pair and every example profile is covered."""
    for path in S.EXAMPLES:
        lp = S.loaded(path)
        for cloud in S.CLOUDS:
            yield f"{path.stem}-{cloud}", lp, cloud
    debian = S.with_os(S.loaded(S.GOLDEN_PROFILE), "debian-12")
    for cloud in S.CLOUDS:
        yield f"golden-debian-12-{cloud}", debian, cloud
    # container stacks (stack.container): the container phases instead of python/packages
    for os_name, cloud in (("ubuntu-22.04", "gcp"), ("ubuntu-24.04", "azure"), ("debian-12", "gcp")):
        yield f"container-{os_name}-{cloud}", S.from_dict(S.container_profile(os_name)), cloud


def test_variants_cover_every_os_and_cloud():
    pairs = {(lp.profile.stack.os, cloud) for _, lp, cloud in _variants()}
    assert pairs == {(o, c) for o in S.OS_NAMES for c in S.CLOUDS}


def test_every_rendered_variant_is_shellcheck_clean(tmp_path):
    files, seen = [], set()
    for label, lp, cloud in _variants():
        rendered = S.render(lp, cloud)
        for kind, text in (("startup", rendered.startup_sh), ("user-data", rendered.preview().text)):
            if text in seen:
                continue
            seen.add(text)
            path = tmp_path / f"{label}-{kind}.sh"
            path.write_text(text, encoding="utf-8")
            files.append(path)
    # the bootstraps (user data, one per cloud), the idle watchdog, the lifecycle scripts, the fetch functions
    files += sorted((S.REPO / "templates/files").glob("trainvm-*.sh")) + sorted((S.REPO / "templates/bootstrap").glob("fetch-*.sh"))
    assert len(files) >= 18
    findings = S.shellcheck(files)
    assert findings == {}, "\n".join(f"{k}:\n{v}" for k, v in findings.items())


def test_startup_scripts_parse_with_bash_n(tmp_path):
    import subprocess

    for label, lp, cloud in _variants():
        path = tmp_path / f"{label}.sh"
        path.write_text(S.render(lp, cloud).startup_sh)
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_user_data_is_the_bootstrap_on_every_cloud():
    """GCE's startup-script value, Azure's customData (cloud-init runs a #! script once per instance) and EC2's user
    data are the same kind of text: the bootstrap naming the payload's sha256, never the provisioning script."""
    lp = S.loaded(S.GOLDEN_PROFILE)
    for cloud in S.CLOUDS:
        rendered = S.render(lp, cloud)
        boot = rendered.preview()
        assert boot.text.startswith("#!/bin/bash\n") and "set -Eeuo pipefail" in boot.text
        assert f"TV_SHA256='{rendered.payload.sha256}'" in boot.text and "phase_driver" not in boot.text
        assert boot.encoding == ("plain" if cloud == "gcp" else "base64")  # Azure customData; the raw EC2 API (boto3 encodes it)
        assert rendered.startup_sh.startswith("#!/bin/bash\n") and "set -Eeuo pipefail" in rendered.startup_sh


def test_targets_are_validated():
    import pytest

    from provisioner.errors import RenderError

    with pytest.raises(RenderError, match="unknown cloud"):
        RenderTarget("gce", "n1-standard-8", "T4", 1, "us-central1")
    with pytest.raises(RenderError, match="not an NVIDIA"):
        S.render(S.loaded(S.GOLDEN_PROFILE), "gcp", gpu="MI300X")
