"""Golden files: the rendered script of profiles/examples/bert-finetune-t4.yaml per cloud (what the payload
carries) and the bootstrap (user data, the same on every cloud but for its fetch function), so template changes
show up in review diffs. Regenerate with

    TRAINVM_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/render/test_golden.py
"""

from __future__ import annotations

import os

import pytest
import trainvm_render_support as S

GOLDEN = S.REPO / "tests/render/golden"
UPDATE = os.environ.get("TRAINVM_UPDATE_GOLDEN") == "1"


def _cases():
    lp = S.loaded(S.GOLDEN_PROFILE)
    gcp, azure, aws = (S.render(lp, c) for c in S.CLOUDS)
    return {
        "gcp-startup-script.sh": gcp.startup_sh,
        "azure-startup.sh": azure.startup_sh,
        "aws-startup.sh": aws.startup_sh,
        # the store's account part is the preview placeholder; the payload's sha256 covers the installed `packaging`
        # (the environment's version), so it is shown as SHA256
        "aws-bootstrap.sh": aws.preview().text.replace(aws.payload.sha256, "SHA256"),
    }


@pytest.mark.parametrize("name", ["gcp-startup-script.sh", "azure-startup.sh", "aws-startup.sh", "aws-bootstrap.sh"])
def test_golden(name):
    text = _cases()[name]
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden {path}; run with TRAINVM_UPDATE_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        import difflib

        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), f"golden/{name}", "rendered", n=2))
        pytest.fail(f"rendered script differs from golden/{name} (TRAINVM_UPDATE_GOLDEN=1 to accept):\n{diff[:6000]}")
