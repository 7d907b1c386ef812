"""The import graph of provisioner/: package cycles and function-local imports (issue 26).

    .venv/bin/python bench/import_graph.py [--edges] [--local]

Parses every module of ``provisioner/`` with ``ast`` (imports at module level and inside functions; the body of an
``if TYPE_CHECKING:`` block is skipped: it never runs) and builds the graph between its top-level packages
(``provisioner.X``: a subpackage or a top-level module; each per-cloud package ``providers/<cloud>/`` is a node of
its own, above the shared ``providers`` modules: see :data:`LAYERED`). Prints the graph, its cycles (strongly connected
components of more than one package) and the function-local imports counted by reason:

- ``cloud SDK``: a lazy import of a cloud SDK (``--help`` and ``plan`` never import one);
- ``heavy: <module>``: a library listed in :data:`HEAVY` with the reason it is imported late;
- ``marked: <reason>``: the line carries a ``# lazy: <reason>`` comment (``startup``: kept off the ``--help`` /
  ``plan`` path; ``cycle``: an import that would close a package cycle at module level);
- ``unjustified``: none of these (a stdlib or trainvm import that could move to the top of its module).

``--edges`` also lists, for each edge of a cycle, the import lines that make it; ``--local`` lists every
unjustified function-local import. tests/unit/test_import_graph.py asserts on the same figures."""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "provisioner"
CLOUD_SDK_PREFIXES = ("google.", "googleapiclient", "azure", "boto3", "botocore", "msrest", "mypy_boto3")
# Libraries a function may import late, with the reason. Anything else late needs a `# lazy: <reason>` comment.
HEAVY = {
    "jinja2": "startup: the template engine is only needed to render (not for --help)",
    "rich": "startup: rich's layout modules (table, panel, ...) are only needed to print a report",
    "tenacity": "startup: retries are only needed where a call goes over the network",
    "requests": "startup: HTTP client, only for the commands that fetch",
    "urllib3": "startup: HTTP client, only for the commands that fetch",
    "paramiko": "startup: SSH client, only for the commands that reach a VM",
    "torch": "the profile's framework: only in the profile's interpreter on the VM (perfprobe), never on the workstation",
}
LAZY_COMMENT = re.compile(r"#\s*lazy:\s*(\S.*)$")
#: A string literal that names a module of provisioner/ (optionally ":attribute"): what a registry loads by name.
MODULE_STRING = re.compile(r"^(provisioner(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?::[A-Za-z_][A-Za-z0-9_.]*)?$")


@dataclass(frozen=True)
class Import:
    path: str  # relative to the repository
    line: int
    target: str  # the dotted module imported (for `from X import Y`: X.Y where that is a module, else X)
    local: bool  # inside a function
    reason: str  # for a local import: "cloud SDK", "heavy: ...", "marked: ...", or "unjustified"; "" when not local
    #: "import" (a statement that runs), "type" (under ``if TYPE_CHECKING:``: never runs) or "string" (a
    #: ``"provisioner.x.y"`` / ``"provisioner.x.y:name"`` literal: a module loaded by name through importlib)
    kind: str = "import"


def module_name(path: Path, base: Path = REPO) -> str:
    parts = path.relative_to(base).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str, base: Path) -> bool:
    rel = Path(*dotted.split("."))
    return (base / rel.with_suffix(".py")).is_file() or (base / rel / "__init__.py").is_file()


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, package: str, base: Path) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        module = f"{parent}.{node.module}" if node.module else parent
    else:
        module = node.module or ""
    if module.startswith("provisioner"):
        subs = [f"{module}.{alias.name}" for alias in node.names if _is_module(f"{module}.{alias.name}", base)]
        if subs:
            return subs + ([module] if len(subs) < len(node.names) else [])
    return [module]


def _reason(target: str, lines: list[str], node: ast.stmt) -> str:
    for text in lines[node.lineno - 1:(node.end_lineno or node.lineno)]:
        if m := LAZY_COMMENT.search(text):
            return f"marked: {m.group(1).split(':')[0].strip()}"
    if target.startswith(CLOUD_SDK_PREFIXES):
        return "cloud SDK"
    top = target.split(".")[0]
    if top in HEAVY:
        return f"heavy: {top}"
    return "unjustified"


def scan(root: Path = ROOT, base: Path = REPO, *, strings: bool = False, type_checking: bool = False) -> list[Import]:
    """Every import under ``root`` (a package directory inside ``base``, the directory on ``sys.path``).

    ``strings``: also every string literal that names a module of ``base`` (``"provisioner.providers.gcp.quota:reader"``),
    as an import of that module (``kind="string"``) by the module that holds the literal. ``type_checking``: also the
    imports under ``if TYPE_CHECKING:`` (``kind="type"``)."""
    found: list[Import] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text, str(path))
        name = module_name(path, base)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        rel = str(path.relative_to(base))

        def visit(node: ast.AST, local: bool, kind: str = "import", rel: str = rel, lines: list[str] = lines,
                  package: str = package) -> None:
            if isinstance(node, ast.If) and _type_checking(node.test):
                if type_checking:
                    for child in node.body:
                        visit(child, local, "type")
                for child in node.orelse:
                    visit(child, local, kind)
                return
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, package, base):
                    reason = _reason(target, lines, node) if local and kind == "import" else ""
                    found.append(Import(rel, node.lineno, target, local, reason, kind))
                return
            if strings and isinstance(node, ast.Constant) and isinstance(node.value, str):
                m = MODULE_STRING.match(node.value)
                if m and _is_module(m.group(1), base):
                    found.append(Import(rel, node.lineno, m.group(1), local, "", "string"))
            inner = local or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for child in ast.iter_child_nodes(node):
                visit(child, inner, kind)

        visit(tree, False)
    return found


# Packages whose subpackages are layers of their own: providers/ holds the shared layer (the registry, the contract,
# the capability interfaces, placement and access facts: modules directly in providers/) that every stage reads,
# and one package per cloud (providers/<cloud>/, the SDK code) that sits above the stages and is loaded by name.
LAYERED = ("providers",)


def top_package(module: str, base: Path = REPO) -> str | None:
    """The graph's node of a module: ``provisioner.X``, or ``X.Y`` for a subpackage Y of a :data:`LAYERED` X."""
    parts = module.split(".")
    if parts[0] != "provisioner" or len(parts) < 2:
        return None
    if parts[1] in LAYERED and len(parts) > 2 and (base / "provisioner" / parts[1] / parts[2] / "__init__.py").is_file():
        return f"{parts[1]}.{parts[2]}"
    return parts[1]


def package_edges(imports: list[Import], base: Path = REPO) -> dict[tuple[str, str], list[Import]]:
    edges: dict[tuple[str, str], list[Import]] = {}
    for imp in imports:
        src = top_package(module_name(base / imp.path, base), base)
        dst = top_package(imp.target, base)
        if src and dst and src != dst:
            edges.setdefault((src, dst), []).append(imp)
    return edges


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one package (Tarjan), each sorted, largest first."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(out, key=lambda c: (-len(c), c))


def cycle_edges(edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The edges that lie on a cycle: both ends in the same strongly connected component."""
    where = {p: i for i, component in enumerate(cycles(edges)) for p in component}
    return {(a, b) for a, b in edges if a in where and where.get(b) == where[a]}


def local_statements(imports: list[Import]) -> list[Import]:
    """One entry per function-local import statement (``from a import b, c`` of two modules is one)."""
    seen: dict[tuple[str, int], Import] = {}
    for imp in imports:
        if imp.local and imp.kind == "import":
            seen.setdefault((imp.path, imp.line), imp)
    return list(seen.values())


def local_counts(imports: list[Import]) -> Counter[str]:
    return Counter(imp.reason for imp in local_statements(imports))


def main() -> None:
    imports = scan()
    edges = package_edges(imports)
    found = cycles(set(edges))
    on_cycle = cycle_edges(set(edges))
    packages = sorted({p for e in edges for p in e})
    print(f"packages of provisioner/ with an edge: {len(packages)}; edges: {len(edges)}")
    for p in packages:
        print(f"  {p} -> {', '.join(sorted(b for a, b in edges if a == p)) or '-'}")
    print(f"\ncycles: {len(found)}; packages on a cycle: {sum(map(len, found))}; edges on a cycle: {len(on_cycle)}")
    for component in found:
        print(f"  [{len(component)}] {' '.join(component)}")
    if "--edges" in sys.argv:
        for a, b in sorted(on_cycle):
            where = ", ".join(f"{i.path}:{i.line}{' (local)' if i.local else ''}" for i in edges[(a, b)])
            print(f"  {a} -> {b}: {where}")
    counts = local_counts(imports)
    print(f"\nfunction-local imports: {sum(counts.values())}")
    for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:4d}  {reason}")
    if "--local" in sys.argv:
        for imp in local_statements(imports):
            if imp.reason == "unjustified":
                print(f"  {imp.path}:{imp.line}: {imp.target}")


if __name__ == "__main__":
    main()
