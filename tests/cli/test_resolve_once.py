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

    def counting(image: str, ref=None):  # type: ignore[no-untyped-def]
        asked.append(image)
        return real(image, ref)

    monkeypatch.setattr(store, "image_facts", counting)
    digest = "sha256:" + "ab" * 32
    path = write_yaml({"name": "ngc", "stack": {"os": "ubuntu-22.04", "driver": "560.35.03",
                                                "container": {"image": f"nvcr.io/nvidia/pytorch:24.08-py3@{digest}"}}})
    r = cli("plan", str(path), "--json")
    assert r.code in (0, 1), r.err
    assert len(asked) == 1, asked


def _code_calls(*functions):  # type: ignore[no-untyped-def]
    """Count calls into ``functions`` by code object (``sys.setprofile``), whatever name a module bound them
    under: a module that imported the function before the test still counts."""
    import contextlib
    import sys

    @contextlib.contextmanager
    def counting():  # type: ignore[no-untyped-def]
        codes = {f.__code__: f.__name__ for f in functions}
        seen: Counter[str] = Counter()

        def hook(frame, event, arg):  # type: ignore[no-untyped-def]
            if event == "call" and frame.f_code in codes:
                seen[codes[frame.f_code]] += 1

        old = sys.getprofile()
        sys.setprofile(hook)
        try:
            yield seen
        finally:
            sys.setprofile(old)
    return counting()


def _container_yaml(write_yaml):  # type: ignore[no-untyped-def]
    from tests.render.support import container_profile

    doc = container_profile()
    doc["hardware"] = {"gpu": "T4", "gpu_count": 1, "min_vcpus": 8, "min_memory_gib": 30}
    doc["placement"] = {"clouds": ["gcp"], "regions": ["us-central1"], "spot": False}
    return write_yaml(doc)


def test_up_parses_the_image_reference_once_into_the_record(cli, clouds, write_yaml, monkeypatch) -> None:
    """One `up` of a container profile: the profile validator checks the string (one parse), ``resolve`` parses
    it into ``loaded.resolved.image`` (one), and the image facts lookup, the registry login (render), the
    expectation (render) read that record instead of parsing the string again (6 parses before)."""
    from provisioner.container.reference import parse_image_ref

    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES", raising=False)
    path = _container_yaml(write_yaml)
    with _code_calls(parse_image_ref) as seen:
        doc = cli("up", str(path), "--yes", "--json", "--cloud", "gcp").json()
    assert doc["attempts"][-1]["outcome"] == "created", doc
    assert seen["parse_image_ref"] == 2, seen


def test_render_parses_the_image_reference_once_into_the_record(cli, write_yaml, monkeypatch, tmp_path) -> None:
    from provisioner.container.reference import parse_image_ref

    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES", raising=False)
    path = _container_yaml(write_yaml)
    with _code_calls(parse_image_ref) as seen:
        r = cli("render", str(path), "--cloud", "gcp", "--out", str(tmp_path / "out"))
    assert r.code == 0, r.err
    assert seen["parse_image_ref"] == 2, seen


@pytest.mark.parametrize("which", ["container", "t4"])
def test_up_computes_the_effective_cuda_once(cli, clouds, write_yaml, monkeypatch, which) -> None:
    """The effective CUDA and the framework scan it is derived from run once per `up` (``resolve``); the render's
    expectation (the VM's expected.json) reads them from the record (before: verify.expect derived them again)."""
    from provisioner.compat.stack import effective_cuda, frameworks

    monkeypatch.delenv("TRAINVM_RESOLVE_IMAGES", raising=False)
    path = _container_yaml(write_yaml) if which == "container" else T4
    with _code_calls(effective_cuda, frameworks) as seen:
        doc = cli("up", str(path), "--yes", "--json", "--cloud", "gcp").json()
    assert doc["attempts"][-1]["outcome"] == "created", doc
    assert seen == {"effective_cuda": 1, "frameworks": 1}, seen
