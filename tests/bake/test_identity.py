"""The baked image's identity record, its label encoding and the match against a profile (provisioner/providers/image_identity.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from provisioner.profile.loader import load_profile
from provisioner.providers.image_identity import (
    LABEL_BASE,
    LABEL_LOCK_B,
    LABEL_STACK,
    SCRIPT_VERSION,
    ImageIdentity,
    identity_from_labels,
    identity_of,
    label_value,
    mismatch,
    stack_hash,
)
from provisioner.render import RenderTarget, build_context

REPO = Path(__file__).resolve().parents[2]
TF = REPO / "profiles/examples/tf-resnet50.yaml"  # has a committed lock
LOCK = "ab" * 32


def _ctx(path: Path = TF, gpu: str = "T4", itype: str = "n1-standard-8"):
    loaded = load_profile(path)
    return build_context(loaded, RenderTarget("gcp", itype, gpu, 1, "us-central1", "us-central1-a"))


def test_identity_is_frozen_and_validated():
    ident = ImageIdentity("0" * 32, LOCK, 1, "debian-12-bookworm-v20241112")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ident.stack = "1" * 32  # type: ignore[misc]
    with pytest.raises(ValueError, match="stack hash"):
        ImageIdentity("xyz", LOCK, 1, "img")
    with pytest.raises(ValueError, match="lock sha256"):
        ImageIdentity("0" * 32, "ab", 1, "img")
    with pytest.raises(ValueError, match="base OS image"):
        ImageIdentity("0" * 32, LOCK, 1, "")


def test_labels_are_valid_gce_labels_and_round_trip():
    ident = ImageIdentity("0123456789abcdef" * 2, LOCK, 3, "Debian:debian-12:12-gen2:0.20241111.1892")
    labels = ident.labels("BERT Finetune")
    for key, value in labels.items():
        assert re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", key), key
        assert re.fullmatch(r"[a-z0-9_-]{0,63}", value), (key, value)
    assert labels[LABEL_BASE] == "debian_debian-12_12-gen2_0_20241111_1892"
    back = identity_from_labels(labels)
    assert back == dataclasses.replace(ident, base_image=labels[LABEL_BASE])
    assert identity_from_labels({"trainvm-stack": "x"}) is None


def test_long_label_values_stay_unique():
    a, b = label_value("x" * 80 + "a"), label_value("x" * 80 + "b")
    assert len(a) <= 63 and len(b) <= 63 and a != b


def test_match_and_each_reason():
    ident = ImageIdentity("0" * 32, LOCK, SCRIPT_VERSION, "debian-12-bookworm-v20241112")
    labels = ident.labels("p")
    assert mismatch(labels, ident) is None
    assert mismatch({**labels, "trainvm-kind": "vm"}, ident) == "it is not a trainvm baked image"
    assert "startup script version 0" in (mismatch({**labels, "trainvm-script": "0"}, ident) or "")
    assert "built from OS image debian-12-old" in (mismatch({**labels, LABEL_BASE: "debian-12-old"}, ident) or "")
    assert "installed stack 111" in (mismatch({**labels, LABEL_STACK: "1" * 32}, ident) or "")
    assert "lock sha256" in (mismatch({**labels, LABEL_LOCK_B: "cd" * 16}, ident) or "")


def test_stack_hash_follows_the_installed_stack_only():
    base = _ctx()
    assert stack_hash(base) == stack_hash(_ctx(itype="n1-standard-16"))  # the shape installs nothing different
    changed = dataclasses.replace(base, packages=(*base.packages, "rich==13.7.1"))
    assert stack_hash(changed) != stack_hash(base)
    assert stack_hash(dataclasses.replace(base, driver="550.90.07")) != stack_hash(base)
    assert stack_hash(dataclasses.replace(base, lock_sha256="0" * 64)) != stack_hash(base)


def test_identity_of_a_locked_profile():
    ctx = _ctx()
    ident = identity_of(ctx, "debian-12-bookworm-v20241112")
    assert ident.lock_sha256 == ctx.lock_sha256 and ident.script_version == SCRIPT_VERSION


def test_the_console_reads_a_builders_final_status():
    from provisioner.verify.console import ConsoleFollower

    follower = ConsoleFollower()
    follower.feed("startup-script: TRAINVM_STATUS=running:packages\nstartup-script: TRAINVM_STATUS=baked\n", 10)
    assert follower.status == "baked"
