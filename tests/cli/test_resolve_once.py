"""Issue 26, resolve once: a command reads the profile's YAML once and derives the stack context (frameworks,
effective CUDA, GPU exclusions) once, however many stages read them (compat check, planner, render of each offer
`up` tries, the located error of a tag-only image). Counted by wrapping the real functions; fake providers
(tests/cli/conftest.py) and the real planner and render."""

from __future__ import annotations

from collections import Counter

import pytest

from provisioner.providers.base import CapacityError
from tests.helpers import REPO

T4 = str(REPO / "profiles" / "examples" / "bert-finetune-t4.yaml")


@pytest.fixture
def calls(monkeypatch) -> Counter[str]:
    import provisioner.compat.rules as rules
    import provisioner.profile.loader as loader
    import provisioner.profile.source as source

    seen: Counter[str] = Counter()

    def counting(name: str, real):  # type: ignore[no-untyped-def]
        def wrapper(*a, **kw):  # type: ignore[no-untyped-def]
            seen[name] += 1
            return real(*a, **kw)
        return wrapper

    monkeypatch.setattr(source, "load_resolved", counting("yaml read", source.load_resolved))
    monkeypatch.setattr(loader, "load_resolved", counting("yaml read", loader.load_resolved))
    monkeypatch.setattr(rules, "stack_context", counting("stack context", rules.stack_context))
    return seen


def test_plan_reads_the_yaml_once_and_derives_the_stack_once(cli, calls) -> None:
    r = cli("plan", T4, "--json")
    assert r.code == 0, r.err
    assert calls == {"yaml read": 1, "stack context": 1}, calls


def test_up_with_failover_derives_once_and_renders_once_per_offer(cli, clouds, calls, monkeypatch) -> None:
    import provisioner.render.script as script

    real = script.render_script
    renders: list[str] = []

    def counting(loaded, target, **kw):  # type: ignore[no-untyped-def]
        renders.append(target.zone or target.region)
        return real(loaded, target, **kw)

    monkeypatch.setattr(script, "render_script", counting)
    clouds["gcp"].fail("us-central1-a", *[CapacityError("stockout", code="ZONE_RESOURCE_POOL_EXHAUSTED")] * 10)
    doc = cli("up", T4, "--yes", "--json", "--cloud", "gcp").json()
    assert [a["outcome"] for a in doc["attempts"]][-1] == "created" and len(doc["attempts"]) == 2, doc["attempts"]
    assert len(renders) <= 2, renders
    assert calls == {"yaml read": 1, "stack context": 1}, calls


def test_up_locates_a_tag_only_image_without_reading_the_yaml_again(cli, write_yaml, calls, monkeypatch) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent")
    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES", raising=False)
    path = write_yaml({"name": "ngc", "stack": {"os": "ubuntu-22.04", "driver": "560.35.03",
                                                "container": {"image": "nvcr.io/nvidia/pytorch:24.08-py3"}}})
    r = cli("up", str(path), "--yes")
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if "image:" in ln)
    assert r.code == 1 and f"{path}:{line}: stack.container.image:" in r.err, r.err
    assert calls["yaml read"] == 1, calls


def test_a_container_stack_looks_up_the_image_facts_once(cli, write_yaml, monkeypatch) -> None:
    """validate's container rules and the planner's GPU exclusions both read the record's image facts (the local
    store; nothing stored here, so the facts are unknown offline and the warning says so)."""
    import provisioner.container.store as store

    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES", raising=False)
    real = store.image_facts
    asked: list[str] = []

    def counting(image: str):  # type: ignore[no-untyped-def]
        asked.append(image)
        return real(image)

    monkeypatch.setattr(store, "image_facts", counting)
    digest = "sha256:" + "ab" * 32
    path = write_yaml({"name": "ngc", "stack": {"os": "ubuntu-22.04", "driver": "560.35.03",
                                                "container": {"image": f"nvcr.io/nvidia/pytorch:24.08-py3@{digest}"}}})
    r = cli("plan", str(path), "--json")
    assert r.code in (0, 1), r.err
    assert len(asked) == 1, asked
