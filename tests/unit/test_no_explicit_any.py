"""Issue 37: "no explicit ``Any`` at a stage boundary": planner/, render/, provision/, verify/, bake/ and commands/ are
checked with ``disallow_any_explicit`` and the strict flags (pyproject.toml), and the JSON documents they read back
(the perf document, ``status`` rows, ``up``'s summary, the catalog refresh report, ``diff``'s rows...) are TypedDicts, so a misspelled key
of such a document, or a wrong record handed to an entry point that took ``Any``, is a mypy error. This runs mypy (its
API, the project's configuration, a cache in tmp) on a small caller and asserts that every line marked ``# typo`` is an
error and nothing else is."""

from __future__ import annotations

import tomllib

from tests.helpers import REPO, mypy_typo_lines

SNIPPET = '''\
from pathlib import Path

from provisioner.bake.cost import monthly_cost
from provisioner.bake.exact import exact_reason
from provisioner.bake.offline import plan_baked, plan_lines
from provisioner.bake.ready_time import basis_lines, ready_json
from provisioner.bake.records import load
from provisioner.catalog.refresh import RefreshReport
from provisioner.catalog.disks import DiskPrices
from provisioner.catalog.models import Offer
from provisioner.commands.clouds import _all_records
from provisioner.commands.down import release_payload, same_name
from provisioner.commands.images import image_doc, image_line
from provisioner.commands.plan import bound_line, cluster_json, cluster_lines
from provisioner.commands.perf import run_perf_probe
from provisioner.commands.render import request_body
from provisioner.commands.status import kept_line, rows_of
from provisioner.commands.up import run_up
from provisioner.commands.up_abort import Leaves
from provisioner.commands.up_summary import UpSummary, summary_lines
from provisioner.commands.validate import validate_one
from provisioner.planner.core import Plan
from provisioner.profile import LoadedProfile
from provisioner.providers.bake_base import BakedImage
from provisioner.providers.base import InstanceRecord, LaunchSpec, Provider
from provisioner.verify.cluster import identity
from provisioner.verify.diff import diff
from provisioner.verify.expect import expected_record
from provisioner.verify.parity import compare, host_of
from provisioner.verify.perfdoc import load_perf
from provisioner.verify.report import StackReport


def bake(loaded: LoadedProfile, offer: Offer, prices: DiskPrices, image: BakedImage) -> None:
    doc = plan_baked(loaded, offer, prices)
    print(plan_lines(doc, offer.cloud), doc["used"], doc["ready"]["seconds"])
    print(doc["uesd"])  # typo
    print(doc["ready"]["at_lest"])  # typo
    print(monthly_cost(image, prices)["monthly"], monthly_cost(image, prices)["montly"])  # typo
    print(exact_reason(loaded), exact_reason(loaded.profile))  # typo
    print(ready_json(loaded.path, offer.cloud, False))  # typo
    print(basis_lines(ready_json(loaded, offer.cloud, True)), basis_lines(doc))  # typo
    print([r["labels"] for r in load()], [r["lables"] for r in load()])  # typo


def verify(report: StackReport) -> None:
    doc = report.as_dict()
    print(doc.get("driver"), identity(report).get("cuda"), report.python_env)
    # a value read from the VM's report (or the identity built from it) is checked before use
    print(doc["driver"].upper())  # typo
    print(identity(report)["nccl"] + 1)  # typo
    print(report.blas["vendor"].lower() if report.blas else None)  # typo


def plan(loaded: LoadedProfile, plan: Plan) -> None:
    bound = plan.bound_json()
    print(bound_line(plan), cluster_lines(loaded, plan), cluster_json(loaded, plan, 8.0))
    print(bound["premium"] if bound is not None else None, bound["premum"] if bound else None)  # typo
    print(bound["premium"] * 100 if bound else None)  # typo
    print(bound_line(loaded))  # typo
    print(cluster_json(plan, loaded, None))  # typo


def commands(provider: Provider, offer: Offer, loaded: LoadedProfile) -> None:
    print(same_name(provider, "vm"), Leaves(attempt=(offer, 1.0)).aborted())
    print(same_name(loaded, "vm"))  # typo
    print(release_payload(provider, offer, "vm"))  # typo
    print(Leaves(attempt=(1.0, offer)))  # typo


def listing(image: BakedImage, prices: DiskPrices) -> None:
    doc = image_doc(image, prices)
    print(image_line(doc), doc["storage"]["monthly"], [u["where"] for u in _all_records().unlisted])
    print(doc["storage"]["monthyl"])  # typo
    print(image_line({"name": image.name}))  # typo
    print([u["wehre"] for u in _all_records().unlisted])  # typo


def validate(loaded: LoadedProfile) -> None:
    result, rc = validate_one(loaded.path)
    print(rc, result["valid"], [m["message"] for m in result["errors"]])
    print(result["vaild"])  # typo
    print([m["mesage"] for m in result["warnings"]])  # typo


def render(spec: LaunchSpec, offer: Offer) -> None:
    body = request_body(offer.cloud, spec, offer)
    print(body.get("name"), sorted(body))
    print(body["name"].upper())  # typo


def perf(path: Path) -> None:
    doc = load_perf(path)
    metric = doc["blocks"]["gpu_matmul"]["metrics"]["matmul_fp32_tflops"]
    print(metric["median"], metric["class"], host_of(doc).get("cpu_count"), doc["elapsed_s"], compare(doc, doc)[0].verdict)
    print(metric["medain"])  # typo
    print(metric["klass"])  # typo
    print(host_of(doc)["cpu_cuont"])  # typo
    print(doc["elapsed"])  # typo
    print((doc["context"].get("gpu") or {}).get("gpus", [])[0]["sm_clock"])  # typo
    print(doc["blocks"]["gpu_matmul"]["info"]["context_under_lod"])  # typo
    print(compare(doc, {"schema": "trainvm.perf/1"}))  # typo
    print(run_perf_probe(None, None, 5.0)["budget"])  # typo


def status(records: list[InstanceRecord]) -> None:
    rows = rows_of(records)
    print([v["cost_so_far"] for v in rows], kept_line(rows[0]), [v["members"] for v in rows if "members" in v])
    print([v["cost_sofar"] for v in rows])  # typo
    print([v["members"] for v in rows])  # typo


def summary(s: UpSummary, path: Path) -> None:
    print(summary_lines(s), s["lifecycle"]["max_run_hours"], s["worst_case_price_hourly"])
    print(s["lifecycle"]["max_run_hour"])  # typo
    print(s["worst_case_price"])  # typo
    print(run_up(path, name=None, yes=True, wait_ready=False, clouds=None, regions=None, spot=None, ssh_from=None,
                 json_out=True, ready_timeout=60.0))
    print(run_up(path, name=None, yes=True, wait_ready=False, clouds=None, regions=None, spot=None, ssh_form=None,  # typo
                 json_out=True, ready_timeout=60.0))


def documents(report: RefreshReport, doc: dict[str, object]) -> None:
    print([c["rows"] for c in report.to_json()["clouds"].values()], [d["field"] for d in diff(doc, doc)])
    print([c["rowz"] for c in report.to_json()["clouds"].values()])  # typo
    print([d["feild"] for d in diff(doc, doc)])  # typo
    print(expected_record(doc).stack.cuda, expected_record(doc).stack.cdua)  # typo
'''

#: issue 37's stage packages: each is checked with disallow_any_explicit and with the strict flags (issue 26's list).
STAGES = ["provisioner.planner.*", "provisioner.render.*", "provisioner.provision.*", "provisioner.verify.*",
          "provisioner.bake.*", "provisioner.commands.*"]
CHECKED = [*STAGES, "provisioner.lock.*"]  # and the lock, which plan and up read
STRICT_FLAGS = ["disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls", "disallow_untyped_decorators",
                "disallow_any_generics", "disallow_subclassing_any", "warn_return_any", "no_implicit_reexport",
                "strict_equality", "extra_checks"]


def _covered(flag: str) -> set[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    return {m for o in config["tool"]["mypy"]["overrides"] if o.get(flag) for m in o["module"]}


def test_the_stage_packages_disallow_explicit_any() -> None:
    assert set(CHECKED) <= _covered("disallow_any_explicit")


def test_the_stage_packages_are_checked_with_the_strict_flags() -> None:
    missing = {flag: sorted(set(CHECKED) - _covered(flag)) for flag in STRICT_FLAGS}
    assert not any(missing.values()), missing


def test_a_misspelled_key_of_a_stage_document_is_a_mypy_error(tmp_path) -> None:
    errors, typos, out = mypy_typo_lines(SNIPPET, tmp_path)
    assert errors == typos, out
