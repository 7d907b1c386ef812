"""Hypothesis: random YAML documents and random values in every field never produce a traceback,
and every error names a field or a line."""

from __future__ import annotations

import copy
from io import StringIO
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from provisioner.errors import InputError, ProfileError
from provisioner.profile import load_profile
from tests.helpers import make_profile

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**12), 10**12), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40), st.sampled_from(["T4", "12.7", "550.127.05", "ubuntu-22.04", "torch==2.4.1", "secret://gcp/x", "$(reboot)", "`id`", "a\nb"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)

VALID = make_profile(
    {"gpu": "T4", "gpu_count": 1, "min_vcpus": 8, "boot_disk": {"type": "ssd", "size_gib": 100}},
    cudnn="9.1.0",
    env={"PYTHONHASHSEED": "0"},
)
VALID["placement"] = {"clouds": ["gcp"], "regions": ["us-*"], "spot": False, "max_price_per_hour": 2.0, "ssh_from": "203.0.113.7/32"}
VALID["data"] = [{"source": "gs://bkt/p/", "dest": "/mnt/data/x"}]
VALID["lifecycle"] = {"idle_shutdown_minutes": 60, "max_run_hours": 24}


def leaf_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += leaf_paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += leaf_paths(v, prefix + (i,))
    return out


PATHS = leaf_paths(VALID)


def dump(doc: Any) -> str:
    buf = StringIO()
    YAML().dump(doc, buf)
    return buf.getvalue()


def check_outcome(path: Path) -> None:
    try:
        load_profile(path)
    except ProfileError as exc:
        assert exc.messages
        for m in exc.messages:
            assert m.path or m.line, m
            assert m.file, m
    except InputError as exc:
        assert str(path) in str(exc)


@SETTINGS
@given(doc=values)
def test_random_documents(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(dump(doc) if doc is not None else "")
    check_outcome(path)


@SETTINGS
@given(text=st.text(max_size=200))
def test_random_text(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(text)
    check_outcome(path)


@SETTINGS
@given(where=st.sampled_from(PATHS), value=values)
def test_random_value_in_every_field(tmp_path: Path, where: tuple[Any, ...], value: Any) -> None:
    doc = copy.deepcopy(VALID)
    node = doc
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    path = tmp_path / "fuzz.yaml"
    path.write_text(dump(doc))
    try:
        load_profile(path)
    except ProfileError as exc:
        for m in exc.messages:
            assert m.line and m.file and (m.path or m.level == "error"), m
    except InputError as exc:  # e.g. a key YAML cannot represent as a string
        assert str(path) in str(exc)


def test_valid_fuzz_base_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(dump(VALID))
    load_profile(path)
