"""The profile hash is a VM's identity (its name, the label `up` adopts it by, its lock): it must not move
when trainvm's defaults move. The hashes below were computed on main at a6eed64, before AWS joined the
default cloud set; a change that alters one of them changes the name of every VM already made from that
profile, so `up` would create a second VM instead of adopting the first."""

from __future__ import annotations

import pytest

from provisioner.profile import load_profile
from provisioner.profile import model as profile_model
from tests.helpers import BASE_PROFILE as BASE
from tests.helpers import REPO

#: profiles/**/*.yaml -> sha256 at a6eed64 (bert-pretrain-8xa100 and tf-resnet50 name placement.clouds)
PINNED = {
    "base/tensorflow-2.15.yaml": "cf51a6ecad78e580e613c9eba952b1e4f0a253307cb163ec389fbb8ec88029c4",
    "base/torch-2.11-cu130.yaml": "eaa1e10feb54cb98189cf509fdee6639feeff5220bb539ec610c2d371b303597",
    "base/torch-2.4-cu124.yaml": "b80db81eb8fc5e795701c811beac07f157cc89597c2d91f031c990699808a9c2",
    "examples/bert-finetune-t4.yaml": "8e6b75dc3316d4dc813d4abe1c94392c0a81828f91b31bc24f06bc7e3a02ae33",
    "examples/bert-pretrain-8xa100.yaml": "9be9538d80007fa19a6a5bf0f8658f7ebb5af224c51c9c98d90b97ef1883ad5d",
    "examples/faster-rcnn.yaml": "f1afe26f534c5b75f64909f324acfd625df23ceae3f7269663f36452f675a2b4",
    # ships its lock since issue 25 (the hash covers the lock's sha256, profile/loader.py): was 6f71ccc6...8a4d3 unlocked
    "examples/tf-resnet50.yaml": "cdca9dfda72c6bfafb1fb06ab04b7d9b889e09623e2b29eb09073eabd9a8ae6e",
    # its gpu list changed on purpose (issue 30: L4 dropped, its usable memory is below a 4090's): was 6cabcd62...676ed
    "examples/workstation-4090.yaml": "a561cc07fa208c8b4020661880834cf407fb8f77d15acf16b85bb15d2406baa0",
}


#: placement written into BASE -> its sha256 at a6eed64
INLINE = {
    "": "b8419fa8a787e21bfab61e0fa63ba5d38ebdba14f9592b08cb98e732e9453acc",
    "placement:\n  spot: true\n": "7a33956dd6cb1d37ac5bd4fb8a99af124177b2e59555b69d8a8e34d195914c3b",
    "placement:\n  clouds: [gcp, azure]\n": "b8419fa8a787e21bfab61e0fa63ba5d38ebdba14f9592b08cb98e732e9453acc",
    "placement:\n  clouds: [gcp, azure, aws]\n": "b010fcda5b754accfd9ce7bcffd22fb455f9d4082687ffc2a38085e3d70685c3",
    "placement:\n  clouds: [aws]\n": "2b3b09fa954c69fc5cd5d57e430634b608c3b68312985d2ca0f150a7d09acddc",
}


def test_every_bundled_profile_is_pinned() -> None:
    assert sorted(p.relative_to(REPO / "profiles").as_posix() for p in (REPO / "profiles").rglob("*.yaml")) == sorted(PINNED)


@pytest.mark.parametrize("rel", sorted(PINNED))
def test_bundled_profile_hash_unchanged(rel: str) -> None:
    assert load_profile(REPO / "profiles" / rel).hash == PINNED[rel]


@pytest.mark.parametrize("placement", list(INLINE), ids=lambda s: s.split("\n")[1].strip() if s else "no placement")
def test_profile_hash_unchanged(write_yaml, placement: str) -> None:
    assert load_profile(write_yaml(BASE + placement)).hash == INLINE[placement]


@pytest.mark.parametrize("default", [("gcp",), ("gcp", "azure"), ("gcp", "azure", "aws"), ("aws", "gcp")])
def test_the_default_cloud_set_does_not_feed_the_hash(write_yaml, monkeypatch, default: tuple[str, ...]) -> None:
    """A profile without placement.clouds is planned on the default set, whatever it is, and hashes the same."""
    monkeypatch.setattr(profile_model, "DEFAULT_CLOUDS", default)
    loaded = load_profile(write_yaml(BASE))
    assert loaded.profile.placement.clouds == list(default)
    assert loaded.hash == INLINE[""]
    explicit = load_profile(write_yaml(BASE + "placement:\n  clouds: [gcp, azure, aws]\n", "explicit.yaml"))
    assert explicit.hash == INLINE["placement:\n  clouds: [gcp, azure, aws]\n"]


def test_clouds_set_in_a_parent_profile_count_as_written(write_yaml) -> None:
    write_yaml(BASE + "placement:\n  clouds: [aws]\n", "parent.yaml")
    child = write_yaml("name: base-stack\nextends: parent.yaml\n", "child.yaml")
    assert load_profile(child).hash == INLINE["placement:\n  clouds: [aws]\n"]
