"""docs/bake.md says which clouds bake as the registry does (issue 36 item 25: it said both that Azure bakes and that
it cannot)."""

from __future__ import annotations

import re

from provisioner.hooks import bakers
from tests.helpers import REPO

DISPLAY = {"gcp": "GCE", "aws": "AWS", "azure": "Azure", "local": "The local cloud"}


def test_bake_md_names_every_cloud_with_a_baker_and_never_says_one_cannot_bake():
    text = (REPO / "docs" / "bake.md").read_text(encoding="utf-8")
    status = text.split("Status", 1)[1].split("\n\n", 1)[0]
    assert bakers() and all(DISPLAY[c] in status for c in bakers())
    after = [m.group(0) for m in re.finditer(r"can(?:not|'t) bake[^.]*", text)]  # to the end of the sentence
    assert after, "the doc says what a cloud without a baker gets"
    assert [s for s in after for c in bakers() if re.search(rf"\b({DISPLAY[c]}|{c})\b", s)] == []
