"""Issue 26: a profile parsed before comes from the parsed-data cache (provisioner/cache.py), so `plan` and
`validate` of an unchanged profile skip ruamel.yaml. The cache may only make them faster, never different."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import BASE_PROFILE, EXAMPLES, REPO


def _trainvm(*args: str, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "XDG_CACHE_HOME": str(cache), "TRAINVM_TODAY": "2026-11-22", **env}
    if "TRAINVM_NO_CACHE" not in env:
        full.pop("TRAINVM_NO_CACHE", None)
    return subprocess.run([sys.executable, "-m", "provisioner", *args], capture_output=True, text=True, cwd=REPO, env=full)


def test_plan_json_from_the_cache_equals_a_fresh_parse(tmp_path: Path) -> None:
    """Cold cache, warm cache and no cache give the same `plan --json` document and the same stderr."""
    cache = tmp_path / "cache"
    for example in EXAMPLES[:2]:
        cold = _trainvm("plan", str(example), "--json", cache=cache)
        warm = _trainvm("plan", str(example), "--json", cache=cache)
        off = _trainvm("plan", str(example), "--json", cache=cache, TRAINVM_NO_CACHE="1")
        assert cold.returncode == warm.returncode == off.returncode == 0, cold.stderr
        assert json.loads(cold.stdout) == json.loads(warm.stdout) == json.loads(off.stdout)
        assert cold.stderr == warm.stderr == off.stderr
    assert list(cache.glob("trainvm/profile-*.pickle")), "the parsed profiles are cached"
    assert list(cache.glob("trainvm/payload-gz-*.pickle")), "so are the compressed payloads"
    assert list(cache.glob("trainvm/jinja-*/*.cache")), "and the compiled templates"


def test_an_edited_profile_is_parsed_again_and_errors_are_never_cached(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    profile = tmp_path / "p.yaml"
    profile.write_text(BASE_PROFILE)
    first = _trainvm("validate", str(profile), "--json", cache=cache)
    assert first.returncode == 0, first.stderr
    profile.write_text(BASE_PROFILE.replace("gpu: T4", "gpu: T4\n  gpu_count: 0"))  # same name, new bytes
    edited = _trainvm("validate", str(profile), "--json", cache=cache)
    assert edited.returncode == 1 and "gpu_count" in edited.stdout, edited.stdout
    profile.write_text(BASE_PROFILE + "hardware: {gpu: T4}\n")  # a duplicate key: a YAML error (exit 2), twice
    for _ in range(2):
        broken = _trainvm("validate", str(profile), cache=cache)
        assert broken.returncode == 2 and "p.yaml:" in broken.stderr and "duplicate" in broken.stderr, broken.stderr
    profile.write_text(BASE_PROFILE)
    assert _trainvm("validate", str(profile), cache=cache).returncode == 0


def test_the_profile_cache_keeps_a_bounded_number_of_entries(tmp_path: Path, monkeypatch) -> None:
    """Every distinct profile text adds one small entry; the oldest go beyond CACHED_PROFILES (the disk)."""
    from provisioner import yamlsource as source

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINVM_NO_CACHE", raising=False)
    monkeypatch.setattr(source, "CACHED_PROFILES", 3)
    for i in range(6):
        path = tmp_path / f"p{i}.yaml"
        path.write_text(BASE_PROFILE.replace("base-stack", f"stack-{i}"))
        assert source.read_yaml(path).data["name"] == f"stack-{i}"
        assert source.read_yaml(path).data["name"] == f"stack-{i}"  # a hit
    assert len(list((tmp_path / "cache" / "trainvm").glob("profile-*.pickle"))) == 3


def test_plan_json_renders_when_the_cache_cannot_be_written(tmp_path: Path) -> None:
    """A cache home that is a file (nothing can be cached) gives the same document as a working cache."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    good = _trainvm("plan", str(EXAMPLES[0]), "--json", cache=tmp_path / "cache")
    bad = _trainvm("plan", str(EXAMPLES[0]), "--json", cache=blocker)
    assert bad.returncode == good.returncode == 0, bad.stderr
    assert json.loads(bad.stdout) == json.loads(good.stdout)


def test_a_template_cache_folder_removed_meanwhile_costs_a_compile_not_an_error(tmp_path: Path, monkeypatch) -> None:
    """Another process may clear ~/.cache/trainvm between the folder's creation and a compiled template's write."""
    import shutil

    from provisioner.render import shell

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TRAINVM_NO_CACHE", raising=False)
    shell.template_env.cache_clear()
    try:
        env = shell.template_env()
        shutil.rmtree(tmp_path / "cache")
        assert env.from_string("{{ 'a b' | shq }}").render() == "'a b'"
        assert env.get_template("startup.sh.j2") is not None
    finally:
        shell.template_env.cache_clear()
