"""Providers import nothing above them (issue 37), counted the strict way: every import that runs (module level and
function-local: the lazy imports inside the typed hooks of provisioner/hooks/ included), and every
``"provisioner.x.y"`` / ``"provisioner.x.y:name"`` string literal (a module loaded by name through importlib; the
``CloudSpec`` hook strings that were the last of them became typed hooks). Imports under ``if TYPE_CHECKING:`` never
run; they are counted apart. bench/import_graph.py builds the graph (``scan(strings=True, type_checking=True)``).

The layer order is in docs/architecture.md ("Layers"): a module under providers/ may import the rest of providers/
and the low shared modules in ``BELOW``, nothing else. The edges still going up are listed in ``KNOWN_UP`` (each
with its reason) and may only shrink: a new one fails, and so does a listed one that is gone."""

from __future__ import annotations

import textwrap
from pathlib import Path

from bench.import_graph import Import, cycle_edges, cycles, package_edges, scan

#: The top-level modules of provisioner/ below providers/: they import only each other (and the standard library).
BELOW = frozenset({"errors", "settings", "secrets", "messages", "wording", "cache", "output", "canonical"})

#: (importer's graph node, imported module, kind) -> why it still goes up. May only shrink.
KNOWN_UP: dict[tuple[str, str, str], str] = {
    # (the CloudSpec hook strings of providers/clouds.py, 20 entries, are gone: the layers above reach a cloud through
    # the typed hooks of provisioner/hooks/, a package above the cloud packages; and aws/calls.py's catalog regions are
    # gone: the layer above hands them to the AWS provider, candidate_regions)
}
#: Imports under ``if TYPE_CHECKING:`` from providers/ into a layer above (they never run). May only shrink.
KNOWN_UP_TYPES: dict[tuple[str, str], str] = {
    ("providers", "provisioner.container.reference"): "base.LaunchSpec.image and registry_auth: the parsed ImageRef",
    ("providers", "provisioner.profile.model"): "registry_auth.py: the Profile a login is derived from",
    ("providers.azure", "provisioner.profile.model"): "azure/preflight.py and provider.py: the Profile that "
                                                      "capabilities.Preflighter.preflight takes (was Any, issue 37)",
}
#: Package cycles under the same count (imports that run, string loads). May only shrink.
# none left: the last cycle went through aws/calls.py's catalog regions (catalog -> hooks -> providers.aws ->
# catalog); the layer above now hands the AWS provider its candidate regions
KNOWN_CYCLE_EDGES: set[tuple[str, str]] = set()


def _up(edges: dict[tuple[str, str], list[Import]]) -> dict[tuple[str, str, str], list[str]]:
    """Every import from a providers node to a node that is neither providers' own nor in BELOW."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for (a, b), imps in edges.items():
        if a == "providers" or a.startswith("providers."):
            for i in imps:
                # a cloud package may import the shared layer; the shared layer may import no cloud package
                if b in BELOW or b == "providers" or (a != "providers" and b == a):
                    continue
                out.setdefault((a, i.target, i.kind), []).append(f"{i.path}:{i.line}")
    return out


def test_providers_import_nothing_above_them() -> None:
    up = _up(package_edges([i for i in scan(strings=True) if i.kind != "type"]))
    new = sorted(set(up) - set(KNOWN_UP))
    assert not new, "providers/ imports a layer above it: " + "; ".join(f"{k}: {up[k]}" for k in new)
    gone = sorted(set(KNOWN_UP) - set(up))
    assert not gone, f"no longer imported, remove from KNOWN_UP: {gone}"


def test_type_only_imports_above_providers_are_the_known_ones() -> None:
    up = _up(package_edges([i for i in scan(type_checking=True) if i.kind == "type"]))
    found = {(a, t) for a, t, _ in up}
    assert found == set(KNOWN_UP_TYPES), f"TYPE_CHECKING imports from providers/ upward: {sorted(found)}"


def test_no_package_cycle_counting_string_loads() -> None:
    edges = package_edges(scan(strings=True))
    on_cycle = cycle_edges(set(edges))
    new = sorted(on_cycle - KNOWN_CYCLE_EDGES)
    assert not new, "new package cycle edge(s), string loads counted: " + "; ".join(
        f"{a} -> {b} ({', '.join(f'{i.path}:{i.line}' for i in edges[(a, b)])})" for a, b in new)
    gone = sorted(KNOWN_CYCLE_EDGES - on_cycle)
    assert not gone, f"no longer on a package cycle, remove from KNOWN_CYCLE_EDGES: {gone}"


def test_the_count_sees_string_loads_and_type_only_imports(tmp_path: Path) -> None:
    """The checker itself: a ``"module:function"`` literal naming a module of the tree is an edge of kind "string"
    from the module holding it; a literal naming no module is not; a TYPE_CHECKING import is kind "type" and only
    with ``type_checking=True``; the string edge closes a cycle that plain imports do not."""
    root = tmp_path / "provisioner"
    files = {
        "__init__.py": "",
        "providers/__init__.py": "",
        "providers/clouds.py": 'HOOK = "provisioner.providers.gcp.quota:reader"\nOTHER = "provisioner.nothing:x"\n',
        "providers/gcp/__init__.py": "",
        "providers/gcp/quota.py": "from typing import TYPE_CHECKING\nfrom provisioner.providers import clouds\n"
                                  "if TYPE_CHECKING:\n    from provisioner.catalog import m\n",
        "catalog/__init__.py": "",
        "catalog/m.py": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    plain = scan(root, tmp_path)
    assert cycles(set(package_edges(plain, tmp_path))) == []
    strict = scan(root, tmp_path, strings=True, type_checking=True)
    kinds = sorted((i.path, i.target, i.kind) for i in strict)
    assert kinds == [("provisioner/providers/clouds.py", "provisioner.providers.gcp.quota", "string"),
                     ("provisioner/providers/gcp/quota.py", "provisioner.catalog.m", "type"),
                     ("provisioner/providers/gcp/quota.py", "provisioner.providers.clouds", "import"),
                     ("provisioner/providers/gcp/quota.py", "typing", "import")]
    edges = package_edges([i for i in strict if i.kind != "type"], tmp_path)
    assert cycles(set(edges)) == [["providers", "providers.gcp"]]


def test_the_count_sees_a_hook_s_lazy_import_and_the_shared_layer_reaching_the_hooks(tmp_path: Path) -> None:
    """The checker on the shape of typed hooks: a hook's function-local import of its cloud's module is an edge
    hooks -> providers.gcp (kind "import"), which closes no cycle; the shared layer importing the hooks package (even
    inside a function) is an import upward that ``_up`` reports, and it closes the cycle the hook strings closed."""
    root = tmp_path / "provisioner"
    files = {
        "__init__.py": "",
        "hooks/__init__.py": "def reader():\n    from provisioner.providers.gcp.quota import reader\n    return reader\n",
        "providers/__init__.py": "",
        "providers/hook_types.py": "",
        "providers/gcp/__init__.py": "",
        "providers/gcp/quota.py": "from provisioner.providers import hook_types\nreader = hook_types\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    found = [i for i in scan(root, tmp_path, strings=True) if i.path == "provisioner/hooks/__init__.py"]
    assert [(i.target, i.local, i.kind) for i in found] == [("provisioner.providers.gcp.quota", True, "import")]
    edges = package_edges(scan(root, tmp_path, strings=True), tmp_path)
    assert ("hooks", "providers.gcp") in edges and cycles(set(edges)) == [] and _up(edges) == {}
    (root / "providers" / "registry.py").write_text("def load():\n    from provisioner import hooks\n    return hooks\n")
    edges = package_edges(scan(root, tmp_path, strings=True), tmp_path)
    assert set(_up(edges)) == {("providers", "provisioner.hooks", "import")}
    assert cycles(set(edges)) == [["hooks", "providers", "providers.gcp"]]
