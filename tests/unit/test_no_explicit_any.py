"""Issue 37: "no explicit ``Any`` at a stage boundary": bake/, verify/ and commands/ are checked with
``disallow_any_explicit`` (pyproject.toml), and the JSON documents they read back are TypedDicts, so a misspelled key
of such a document, or a wrong record handed to an entry point that took ``Any``, is a mypy error. This runs mypy (its
API, the project's configuration, a cache in tmp) on a small caller and asserts that every line marked ``# typo`` is an
error and nothing else is."""

from __future__ import annotations

import tomllib

from tests.helpers import REPO, mypy_typo_lines

SNIPPET = '''\
from provisioner.bake.cost import monthly_cost
from provisioner.bake.exact import exact_reason
from provisioner.bake.offline import plan_baked, plan_lines
from provisioner.bake.ready_time import basis_lines, ready_json
from provisioner.bake.records import load
from provisioner.catalog.disks import DiskPrices
from provisioner.catalog.models import Offer
from provisioner.commands.clouds import _all_records
from provisioner.commands.down import release_payload, same_name
from provisioner.commands.images import image_doc, image_line
from provisioner.commands.plan import bound_line, cluster_json, cluster_lines
from provisioner.commands.render import request_body
from provisioner.commands.up_abort import Leaves
from provisioner.commands.validate import validate_one
from provisioner.planner.core import Plan
from provisioner.profile import LoadedProfile
from provisioner.providers.bake_base import BakedImage
from provisioner.providers.base import LaunchSpec, Provider
from provisioner.verify.cluster import identity
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
'''

CHECKED = ["provisioner.bake.*", "provisioner.verify.compare", "provisioner.verify.cluster", "provisioner.verify.records",
           "provisioner.verify.report", "provisioner.commands.plan", "provisioner.commands.down",
           "provisioner.commands.power", "provisioner.commands.up_abort", "provisioner.commands.verify",
           "provisioner.commands.clouds", "provisioner.commands.images", "provisioner.commands.vm_record",
           "provisioner.commands.validate", "provisioner.commands.render"]


def test_bake_verify_commands_disallow_explicit_any() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    strict_any = {m for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_any_explicit") for m in o["module"]}
    assert set(CHECKED) <= strict_any


def test_a_misspelled_key_of_a_stage_document_is_a_mypy_error(tmp_path) -> None:
    errors, typos, out = mypy_typo_lines(SNIPPET, tmp_path)
    assert errors == typos, out
