"""Issue 37: "the typed record reaches the cloud call". A provider reads what it needs from ``LaunchSpec``'s typed
fields (``secret_refs``, ``image``, ``registry_auth``, ``identity``, ``spot``, ``ssh_from``, the lifecycle, the
disks, ``payload``); ``LaunchSpec.profile_json`` (the resolved profile as text) is only ever WRITTEN to the cloud
(GCE metadata, AWS tags, Azure user data), never parsed back for a fact. This walks every module under
``provisioner/providers/`` (AST, no import) and fails on any use of ``profile_json`` that is not such a write:
``json.loads(spec.profile_json)``, a regex over it, ``getattr(x, "profile_json")``, a ``profile_json`` parameter
of a function that is not one of the writers."""

from __future__ import annotations

import ast

from tests.helpers import REPO

PROVIDERS = REPO / "provisioner" / "providers"
#: the calls a profile_json may be handed to: they encode it for the cloud (AWS: gzip+base64 tags; Azure: base64
#: user data), and ``str.encode`` (its size in bytes, which a cloud's limit is about)
SINKS = {"profile_tags", "_b64", "encode"}
#: functions that take the text itself as a parameter: the encoders above
WRITERS = {"profile_tags", "_b64"}


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _is_write(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    up = parents.get(node)
    if isinstance(up, ast.Dict) and any(v is node for v in up.values):  # {"key": "trainvm-profile", "value": <it>}
        return True
    if isinstance(up, ast.Attribute) and up.attr == "encode":  # <it>.encode(): bytes for an encoder or a size
        return True
    if isinstance(up, ast.Call) and node in up.args:
        func = up.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in SINKS
    return False


def reads_of_profile_json(source: str, filename: str = "<snippet>") -> list[str]:
    """Every use of ``profile_json`` in ``source`` that is not a write to the cloud, as ``FILE:LINE: what``."""
    tree = ast.parse(source, filename)
    parents = _parents(tree)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "profile_json" and isinstance(node.ctx, ast.Load):
            if not _is_write(node, parents):
                bad.append(f"{filename}:{node.lineno}: reads .profile_json")
        elif isinstance(node, ast.Name) and node.id == "profile_json" and isinstance(node.ctx, ast.Load):
            fn = next((p for p in _ancestors(node, parents) if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
            if fn is None or fn.name not in WRITERS or not _is_write(node, parents):
                bad.append(f"{filename}:{node.lineno}: reads profile_json")
        elif isinstance(node, ast.Constant) and node.value == "profile_json":
            bad.append(f"{filename}:{node.lineno}: names 'profile_json' (getattr)")
        elif isinstance(node, ast.arg) and "profile_json" in node.arg:
            fn = parents.get(parents.get(node, node), node)
            if not (isinstance(fn, ast.FunctionDef) and fn.name in WRITERS):
                bad.append(f"{filename}:{node.lineno}: takes {node.arg}")
    return bad


def _ancestors(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> list[ast.AST]:
    out = []
    while node in parents:
        node = parents[node]
        out.append(node)
    return out


def test_no_provider_reads_a_fact_back_out_of_the_stored_profile() -> None:
    bad = [b for path in sorted(PROVIDERS.rglob("*.py"))
           for b in reads_of_profile_json(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))]
    assert bad == [], "a provider reads the stored profile's text; give LaunchSpec a typed field instead:\n" + "\n".join(bad)


def test_the_check_sees_each_way_of_reading_it() -> None:
    """The walker itself: the reads issue 37 found (json.loads for the container image, getattr for the identity, a
    regex for the secret names) are caught, the three writes are not."""
    reads = '''
import json, re
def ecr(spec):
    return json.loads(spec.profile_json)["stack"]["container"]["image"]
def user_identity(spec_or_text):
    return getattr(spec_or_text, "profile_json", spec_or_text)
def secret_names(spec):
    return re.findall(r"secret://aws/([^\\"]+)", spec.profile_json)
def helper(profile_json):
    return json.loads(profile_json)
'''
    assert len(reads_of_profile_json(reads)) == 5
    writes = '''
def _metadata(spec):
    return [{"key": "trainvm-profile", "value": spec.profile_json}]
def instance_tags(spec):
    return profile_tags(spec.profile_json)
def profile_tags(profile_json):
    return gzip.compress(profile_json.encode())
def user_data(spec):
    value = _b64(spec.profile_json)
    raise ValueError(len(spec.profile_json.encode()))
'''
    assert reads_of_profile_json(writes) == []
