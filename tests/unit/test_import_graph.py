"""No package cycles in provisioner/; function-local imports only for a reason (issue 26).

The graph counts every import (module level and function-local; the body of ``if TYPE_CHECKING:`` is skipped)
between the top-level packages of ``provisioner/`` (bench/import_graph.py builds it and prints it). Today's
cycle edges are listed in KNOWN_EDGES and today's unjustified function-local imports counted in KNOWN_LOCAL:
both may only shrink. A new cycle edge fails; an allowlisted edge that no longer lies on a cycle fails too
(remove it from the list, so that it stays honest). Each per-cloud package providers/<cloud>/ is a node of its own
(bench/import_graph.py LAYERED): the shared modules of providers/ (registry, contract, capabilities, placement and
access facts) are a layer below the stages, the per-cloud SDK code a layer above them, loaded by name."""

from __future__ import annotations

import textwrap
from pathlib import Path

from bench.import_graph import cycle_edges, cycles, local_counts, local_statements, package_edges, scan, top_package

# Edges (importer -> imported, top-level packages of provisioner/) that lie on a package cycle today. May only shrink.
# Empty from session 9 only because the catalog reached the clouds by name ("module:function" strings, not counted
# here; tests/unit/test_layers.py counted them and saw the cycle). Issue 37: the catalog calls the clouds' typed hooks
# (provisioner/hooks/: their function-local imports are counted), so this count sees it too: catalog -> hooks ->
# providers.aws -> catalog, closed only by providers/aws/calls.py reading the catalog's AWS regions; that read is gone
# (the layer above hands the AWS provider its candidate regions), and so is the cycle.
KNOWN_EDGES: set[tuple[str, str]] = set()
# Function-local imports with no reason: not a cloud SDK, not a library in bench/import_graph.py's HEAVY, and no
# `# lazy: <reason>` comment on the line. May only shrink.
KNOWN_LOCAL = 0


def test_no_new_package_cycle_and_the_allowlist_is_current() -> None:
    edges = package_edges(scan())
    on_cycle = cycle_edges(set(edges))
    new = sorted(on_cycle - KNOWN_EDGES)
    assert not new, "new package cycle edge(s): " + "; ".join(
        f"{a} -> {b} ({', '.join(f'{i.path}:{i.line}' for i in edges[(a, b)])})" for a, b in new)
    gone = sorted(KNOWN_EDGES - on_cycle)
    assert not gone, f"no longer on a package cycle, remove from KNOWN_EDGES: {gone}"


def test_function_local_imports_have_a_reason() -> None:
    imports = scan()
    unjustified = local_counts(imports)["unjustified"]
    where = [f"{i.path}:{i.line}: {i.target}" for i in local_statements(imports) if i.reason == "unjustified"]
    assert unjustified <= KNOWN_LOCAL, (
        f"{unjustified - KNOWN_LOCAL} new function-local import(s) with no reason: import at module level, or "
        f"mark the line `# lazy: <reason>` (startup, cycle, ...). All of them: {where}")
    assert unjustified == KNOWN_LOCAL, f"only {unjustified} unjustified function-local imports left: lower KNOWN_LOCAL"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "provisioner" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path / "provisioner"


def test_the_graph_sees_local_imports_and_skips_type_checking(tmp_path: Path) -> None:
    """The checker itself: a cycle closed by a function-local import is found; one closed only under
    TYPE_CHECKING is not; `from package import module` is an edge to that module's package."""
    root = _tree(tmp_path, {
        "__init__.py": "",
        "a/__init__.py": "from provisioner.b import thing\n",
        "b/__init__.py": "thing = 1\n\ndef late():\n    from provisioner.a import x  # lazy: cycle\n    return x\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from provisioner import a\n"
                "else:\n    import json\n\ndef f():\n    import boto3\n    import os\n    return os, boto3\n",
        "d/__init__.py": "",
        "d/e.py": "from .. import c\nfrom provisioner import d\n",
    })
    imports = scan(root, tmp_path)
    edges = package_edges(imports, tmp_path)
    assert set(edges) == {("a", "b"), ("b", "a"), ("d", "c")}
    assert cycles(set(edges)) == [["a", "b"]]
    assert cycle_edges(set(edges)) == {("a", "b"), ("b", "a")}
    assert local_counts(imports) == {"marked: cycle": 1, "cloud SDK": 1, "unjustified": 1}


def test_the_old_yaml_reader_name_is_the_moved_module() -> None:
    """profile/source.py moved to provisioner/yamlsource.py; the old name (kept for branches written before the move)
    is the same module object, so a test that patches it patches the reader every caller uses."""
    import provisioner.profile.source as old
    from provisioner import yamlsource

    assert old is yamlsource
    assert old.load_resolved is yamlsource.load_resolved


def test_the_shared_providers_layer_imports_no_cloud_package_and_no_stage() -> None:
    """The modules directly in providers/ sit below everything that reads the registry: they import no per-cloud
    package (the layers above reach those through the typed hooks of provisioner/hooks/) and none of the stages that
    import them (catalog, profile, planner, render, provision, lock, bake)."""
    edges = package_edges(scan())
    up = sorted((b, [f"{i.path}:{i.line}" for i in imps]) for (a, b), imps in edges.items()
                if a == "providers" and (b.startswith("providers.") or b in (
                    "catalog", "profile", "planner", "render", "provision", "lock", "bake", "commands")))
    assert up == []


def test_a_layered_package_s_subpackages_are_nodes_of_their_own(tmp_path: Path) -> None:
    """providers/<cloud>/ is its own node; a module directly in providers/ is the providers node; a cycle between
    the shared layer and a cloud package is still a cycle."""
    root = _tree(tmp_path, {
        "__init__.py": "",
        "providers/__init__.py": "",
        "providers/registry.py": "def late():\n    from provisioner.providers.gcp import api\n    return api\n",
        "providers/gcp/__init__.py": "",
        "providers/gcp/api.py": "from provisioner.providers import registry\nfrom provisioner.catalog import x\n",
        "catalog/__init__.py": "x = 1\n",
    })
    assert top_package("provisioner.providers.registry", tmp_path) == "providers"
    assert top_package("provisioner.providers.gcp.api", tmp_path) == "providers.gcp"
    assert top_package("provisioner.providers.gcp", tmp_path) == "providers.gcp"
    edges = package_edges(scan(root, tmp_path), tmp_path)
    assert set(edges) == {("providers", "providers.gcp"), ("providers.gcp", "providers"), ("providers.gcp", "catalog")}
    assert cycles(set(edges)) == [["providers", "providers.gcp"]]


def test_the_cloud_packages_import_no_orchestrator() -> None:
    """bake (and commands) orchestrate the stages and the clouds: a cloud package reads what it needs of them from the
    shared providers layer (the image identity a baker labels and matches: providers/image_identity.py), never from
    the orchestrator, so that no cloud package can close a cycle through it."""
    edges = package_edges(scan())
    up = sorted((a, b, [f"{i.path}:{i.line}" for i in imps]) for (a, b), imps in edges.items()
                if a.startswith("providers.") and b in ("bake", "commands", "cli"))
    assert up == []
