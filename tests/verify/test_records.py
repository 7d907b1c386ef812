"""verify compares typed records (issue 26): the expectation built from a profile is a frozen ``Expectation``
(provisioner/verify/records.py) and the observed machine a frozen ``StackReport``; both forbid unknown fields, so
a misspelled field name is an error, never a field silently "equal" because both sides read it as missing. The
one judge (provisioner/agent/compare.py, stdlib only: it also runs on the VM over expected.json) reads the
records' documents; a test here proves it reads no key the records do not define."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from provisioner.errors import ReportUnreadableError
from provisioner.verify.compare import compare, compare_records
from provisioner.verify.expect import expectation, expected_record
from provisioner.verify.records import Expectation, ExpectedHardware, ExpectedStack
from provisioner.verify.report import StackReport


def test_a_misspelled_expectation_field_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="cuda_tolkit"):
        ExpectedStack.model_validate({"cuda_tolkit": True})
    with pytest.raises(ValidationError, match="min_gpu_mem_gib"):
        ExpectedHardware.model_validate({"gpu_count": 1, "min_gpu_mem_gib": 16})


def test_a_misspelled_report_field_is_a_validation_error(vm_report: dict[str, Any]) -> None:
    """The project's error naming the field (issue 37: compare raised pydantic's raw ValidationError)."""
    vm_report["drivr"] = vm_report.pop("driver")
    with pytest.raises(ReportUnreadableError, match="drivr: Extra inputs are not permitted"):
        compare(_profile(), vm_report)


def test_the_records_are_frozen(profile: dict[str, Any]) -> None:
    record = expected_record(profile)
    with pytest.raises(ValidationError):
        record.stack.driver = "470.00.00"  # type: ignore[misc]


def test_the_expectation_document_is_the_records(profile: dict[str, Any]) -> None:
    record = expected_record(profile)
    assert isinstance(record, Expectation) and expectation(profile) == record.as_dict()
    assert record.stack.packages[0] == ("torch", "2.4.1+cu124") and record.hardware.gpu == ("T4",)
    assert Expectation.model_validate(record.as_dict()) == record  # the VM's expected.json reads back as the record


def test_compare_records_is_compare(profile: dict[str, Any], vm_report: dict[str, Any]) -> None:
    vm_report["python"] = "3.11.4"
    typed = compare_records(expected_record(profile), StackReport.model_validate(vm_report))
    assert typed == compare(profile, vm_report) and typed.status == "drift"
    assert ("stack.python", "3.11.9", "3.11.4", "DRIFT") in typed.rows()


class Strict(Mapping[str, Any]):
    """A record's document that refuses a key the record does not define (a misspelled read)."""

    def __init__(self, doc: dict[str, Any], what: str) -> None:
        self.doc, self.what = doc, what

    def __getitem__(self, key: str) -> Any:
        if key not in self.doc:
            raise AssertionError(f"the judge read {self.what}.{key}, which the record does not define")
        return self.doc[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.doc)

    def __len__(self) -> int:
        return len(self.doc)


def strict(model: BaseModel, what: str) -> Strict:
    """The record's JSON document, every nested record wrapped (free-form dict fields stay plain)."""
    doc = model.model_dump(mode="json", by_alias=True)
    for name, info in type(model).model_fields.items():
        value, key = getattr(model, name), info.alias or name
        if isinstance(value, BaseModel):
            doc[key] = strict(value, f"{what}.{key}")
        elif isinstance(value, tuple) and value and all(isinstance(v, BaseModel) for v in value):
            doc[key] = [strict(v, f"{what}.{key}[]") for v in value]
    return Strict(doc, what)


def _profile() -> dict[str, Any]:
    return {"name": "x", "hardware": {"gpu": "T4", "gpu_count": 1, "min_gpu_memory_gib": 16, "min_vcpus": 4,
                                      "min_memory_gib": 8, "local_nvme_gib": 375},
            "stack": {"os": "ubuntu-22.04", "driver": "550.127.05", "cuda": "12.4", "cuda_toolkit": True,
                      "cudnn": "9.1.0", "python": "3.11.9", "packages": ["torch==2.4.1+cu124"],
                      "container": {"image": "nvcr.io/nvidia/pytorch:24.05-py3@sha256:" + "a" * 64}},
            "sources": [{"name": "team", "url": "https://example.com/t.git", "ref": "main", "commit": "abc"}],
            "lock": {"packages": {"numpy": "1.26.4"}}}


@pytest.mark.parametrize("source", ["vm", "local"])
def test_the_judge_reads_only_what_the_records_define(vm_report: dict[str, Any], source: str, monkeypatch) -> None:
    """Every field group is exercised (a container with known facts included: the store's lookup answers them, the
    one thing stubbed here, as an image trainvm has resolved would)."""
    from types import SimpleNamespace

    from provisioner.agent.compare import compare as judge
    from provisioner.container import store

    known = SimpleNamespace(framework=("torch", "2.4.1"), cuda="12.4", env={"CUDNN_VERSION": "9.1.0.70"})
    monkeypatch.setattr(store, "lookup", lambda digest: known)

    report = copy.deepcopy(vm_report)
    report["source"] = source
    report["container"] = {"image": "x", "digest": "sha256:" + "0" * 64}
    expected, observed = expected_record(_profile()), StackReport.model_validate(report)
    plain = judge(expected.as_dict(), observed.as_dict())
    assert judge(strict(expected, "expectation"), strict(observed, "report")) == plain
    assert {f.field for f in plain.fields} >= {"stack.container.cudnn", "stack.cuda_toolkit", "lock.packages.numpy",
                                               "hardware.local_nvme_gib", "source.team", "stack.framework.gpu"}
