"""The project documents itself: the profile reference is generated from the schema and current, and
the README / docs link only files that exist in the repository."""

from __future__ import annotations

import re
from pathlib import Path

from provisioner.commands.validate import profile_json_schema
from provisioner.profile.reference import reference_markdown

REPO = Path(__file__).resolve().parents[2]


def test_profile_reference_is_current() -> None:
    current = (REPO / "docs" / "profile-reference.md").read_text(encoding="utf-8")
    assert current == reference_markdown(profile_json_schema()), \
        "docs/profile-reference.md is stale: run `.venv/bin/python -m provisioner.profile.reference > docs/profile-reference.md`"


def test_the_reference_states_the_extends_merge_rules_and_every_field() -> None:
    text = (REPO / "docs" / "profile-reference.md").read_text(encoding="utf-8")
    assert "maps merge key by key" in text and "lists and scalars replace" in text
    schema = profile_json_schema()
    for section in schema["$defs"].values():
        for field in section["properties"]:
            assert f"| `{field}` |" in text


def test_docs_link_only_files_in_the_repository() -> None:
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        assert "../" + "shared" not in text, f"{doc.name} points outside the repository"
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            assert (doc.parent / target).exists(), f"{doc.name} links {target}, which does not exist"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else len(text)]


def test_the_emulator_walkthrough_installs_what_it_needs_first() -> None:
    walk = _section((REPO / "README.md").read_text(encoding="utf-8"), "## Trying it against the emulators")
    assert "make demo" in walk  # issue 36 item 26: one command, which installs the dev extras first
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo: install-dev\n\t@?\$\(BIN\)/python -m tests\.emulators\.serve\b", makefile, re.M)


def test_the_spec_says_what_the_gce_request_sends() -> None:
    from provisioner.profile.model import Lifecycle
    from provisioner.providers.gcp.request import TERMINATION_ACTION

    spec = (REPO / "docs" / "spec.md").read_text(encoding="utf-8")
    default = TERMINATION_ACTION[Lifecycle.model_fields["on_max_run"].default]
    assert "`instanceTerminationAction=DELETE`" not in spec
    assert f"`instanceTerminationAction` follows `lifecycle.on_max_run` (`{default}` by default" in spec
    plan_row = next(ln for ln in spec.splitlines() if ln.startswith("| `trainvm plan PROFILE`"))
    assert "request body" not in plan_row.replace("create-request body: `trainvm render`", "")  # --show-script: the script only


def test_the_reference_names_every_secret_store_and_the_bundled_fallback() -> None:
    from provisioner.providers.registry import CLOUDS

    text = (REPO / "docs" / "profile-reference.md").read_text(encoding="utf-8")
    env_row = next(ln for ln in text.splitlines() if ln.startswith("| `env` |"))
    for scheme in sorted({k for c in CLOUDS.values() for k in c.secret_kinds}):
        assert f"secret://{scheme}/" in env_row, scheme
    assert "bundled" in _section(text, "**`extends` merge rules.**")


def test_the_catalog_readme_states_the_schema_version_of_the_data() -> None:
    import json

    data = REPO / "provisioner" / "catalog" / "data"
    version = json.loads((data / "catalog.json").read_text())["schema_version"]
    assert f"(schema_version {version})" in (data / "README.md").read_text(encoding="utf-8")


def test_docs_name_only_commands_that_exist() -> None:
    from provisioner.cli import app, catalog_app

    names = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
    names |= {g.name for g in app.registered_groups} | {"--help", "--version", "--debug", "--install-completion"}
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for word in re.findall(r"`trainvm ([a-z-]+)", text) + re.findall(r"`(?:list|status)`/`([a-z]+)`", text):
            assert word in names, f"{doc.name} names `trainvm {word}`, which is not a command"
    assert {c.name for c in catalog_app.registered_commands} == {"show", "refresh"}


def test_nothing_points_outside_the_repository_or_at_one_machine() -> None:
    import subprocess

    found = subprocess.run(["git", "grep", "-n", "-I", "-e", "\\.\\./shared", "-e", "/" + "work/", "--", ".",
                            ":!tests/unit/test_docs.py"],
                           cwd=REPO, capture_output=True, text=True).stdout
    assert found == "", f"pointers outside the repository:\n{found}"
    for doc in [*sorted((REPO / "bench").glob("*.md")), *sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]:
        text = doc.read_text(encoding="utf-8")
        assert not re.search(r"(?<![\w.])/(?:work|home|Users|root)/\w", text), f"{doc.name} names a path of one machine"


def test_make_catalog_builds_from_the_repository_alone(tmp_path) -> None:
    """In a copy of the repository with nothing beside it (a fresh clone), the catalog build finds its snapshot
    and reproduces the committed catalog."""
    import shutil
    import subprocess
    import sys

    clone = tmp_path / "clone"
    for part in ("scripts", "provisioner"):
        shutil.copytree(REPO / part, clone / part, ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([sys.executable, "scripts/build_catalog.py", "--check"], cwd=clone, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "up to date" in r.stdout
    assert "catalog:" in (REPO / "Makefile").read_text() and "../" + "shared" not in (REPO / "Makefile").read_text()


def test_the_readme_is_a_newcomers_page() -> None:
    """Issue 37: the README is a short page (what it is, the two commands, the demo, one profile, one line per
    command, what it costs and what `down` deletes, where the rest is); the reference lives in docs/."""
    from provisioner.cli import app

    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "the README is for a newcomer: reference material goes to docs/"
    for heading in ("## Quick start", "## Trying it against the emulators", "## A profile", "## Commands",
                    "## What it costs and what `down` deletes", "## Where the rest is"):
        assert f"\n{heading}" in text, heading
    rows = [ln for ln in _section(text, "## Commands").splitlines() if ln.startswith("| `trainvm ")]
    names = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
    names |= {g.name for g in app.registered_groups}
    assert names <= set(re.findall(r"`trainvm ([a-z-]+)", "\n".join(rows))), "every command has its line"
    assert all(len(row) <= 200 for row in rows), "one short line per command; the long text is docs/commands.md's"
    rest = _section(text, "## Where the rest is")
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"(docs/{page.name}" in text, f"the README does not say where docs/{page.name} is"
    assert "(docs/commands.md)" in rest and "(docs/vm.md)" in rest


def test_the_reference_that_left_the_readme_is_in_docs() -> None:
    """Issue 37: every section the README used to hold is a section of one docs/ page, with its facts."""
    docs = {p.name: p.read_text(encoding="utf-8") for p in (REPO / "docs").glob("*.md")}
    where = {
        "commands.md": ["# Commands", "| code | meaning |", "Shell completion: `trainvm --install-completion`"],
        "profile-guide.md": ["## A profile", "## Container stacks", "## Compatibility facts",
                             "## Where the data can be read", "## Several nodes (`hardware.nodes`)",
                             "# ddp.yaml: four A100 nodes"],
        "vm.md": ["## What `up` creates", "## What it costs and what is kept", "## Secrets and hostile input",
                  "## Under faults (what `up` and `down` promise)", "## The payload: how a VM gets its provisioner",
                  "## The startup script", "## Quota preflight (`up`, `plan --quota`)",
                  "**Azure preflight and \"Azure without role-assignment rights\".**"],
        "locks.md": ["# Lock files (`trainvm lock`) and team profile sources", "## Bundled examples and locks",
                     "## Team profile sources", "| `lock_version`, `generated_by` |"],
        "performance-parity.md": ["# Performance parity", "`trainvm parity A B`: tolerance per metric"],
        "development.md": ["# Development", "## Live lane (a real cloud account)", "make test-live CLOUD=gcp"],
        "settings.md": ["## Cloud credentials", "`TRAINVM_METADATA_PROBE=always`"],
        "demo.md": ["## What the emulators check", "tests/contract/README.md"],
    }
    for page, needles in where.items():
        for needle in needles:
            assert needle in docs[page], f"docs/{page} lacks {needle!r}"


def test_pointers_to_a_docs_section_name_one_that_exists() -> None:
    """Issue 37: code, messages and comments that send the reader to `README "Section"` or `docs/X.md "Section"`
    name a section that page holds (sections move from the README to docs/; a pointer must move with them)."""
    import subprocess

    files = subprocess.run(["git", "ls-files", "provisioner", "tests", "bench", "scripts", "Makefile", "templates"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    pointer = re.compile(r'\b(README|docs/[\w.-]+\.md),? \\?"([^"\\]+)\\?"')
    checked = 0
    for name in files:
        path = REPO / name
        if path.suffix not in {".py", ".md", ".sh", ".j2", ""} or not path.is_file() or name == "tests/unit/test_docs.py":
            continue
        for page, section in pointer.findall(path.read_text(encoding="utf-8", errors="replace")):
            target = REPO / ("README.md" if page == "README" else page)
            assert target.is_file() and section.lower() in target.read_text(encoding="utf-8").lower(), \
                f'{name} points at {page} "{section}", which that page does not hold'
            checked += 1
    assert checked, "no pointer found: the pattern is stale"
