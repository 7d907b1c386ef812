"""Issue 26: "a typo such as ``loaded.profiel`` on the main path passes mypy". The stage boundaries trainvm's
provision/, verify/ and the providers' contract expose are typed (and mypy-strict, pyproject.toml): this runs mypy
(its API, the project's configuration, a cache in tmp) on a small caller of those entry points and asserts that
every misspelled attribute or field (the lines marked ``# typo``) is an error, and that nothing else is (the
correctly spelled calls beside them type-check). Issue 37: the typed fields a provider reads (``LaunchSpec.image``,
``identity``...) are among them, and handing a provider's helper the stored profile's text is a type error; the render entry points
take a ``LoadedProfile`` and an ``Offer`` (they took ``Any``: a Profile or a string passed)."""

from __future__ import annotations

from tests.helpers import mypy_typo_lines

SNIPPET = '''\
from provisioner.catalog.models import Offer
from provisioner.profile import LoadedProfile
from provisioner.provision.failover import provision
from provisioner.provision.launch import launch_spec
from provisioner.provision.quota import Preflight
from provisioner.providers.azure.identity import user_identity
from provisioner.providers.base import LaunchSpec, Provider
from provisioner.providers.registry_auth import ecr_statements
from provisioner.providers.poll import poll
from provisioner.verify.compare import compare, compare_records
from provisioner.verify.expect import expected_record
from provisioner.verify.records import ExpectedStack
from provisioner.verify.report import StackReport
from provisioner.render.context import build_context, target_from_offer
from provisioner.render.script import render_for_offer, render_script


def main(loaded: LoadedProfile, offer: Offer, provider: Provider, report: StackReport) -> None:
    spec = launch_spec(loaded, offer, rendered=render_for_offer(loaded, offer))
    print(loaded.profile.name, spec.name, offer.instance_type)
    print(loaded.profiel)  # typo
    print(spec.nmae)  # typo
    record = provider.create(spec, offer)
    print(record.cloud_id, provider.craete)  # typo
    print(record.clodu_id)  # typo
    done = provision([offer], lambda o: spec, lambda cloud: provider)
    print(done.record.name, done.recrod)  # typo
    gate = Preflight({"gcp": provider}, spot=False, nodes=1)
    print(gate.providers["gcp"].find("x"), gate.providers["gcp"].fnid("x"))  # typo
    expected = expected_record({"stack": {}})
    print(expected.stack.driver, expected.hardware.gpu_count)
    print(expected.stack.drvier)  # typo
    ExpectedStack(cuda_toolkit=True)
    ExpectedStack(cuda_tolkit=True)  # typo
    result = compare_records(expected, report)
    print(result.status, report.framework, result.stauts)  # typo
    print(report.framwork)  # typo
    print(compare({"stack": {}}, None).fields)
    spec2: LaunchSpec = poll(lambda: spec, deadline=0.0, timed_out=lambda last: TimeoutError())
    print(spec2.profile_hash, spec2.profile_hsah)  # typo
    print(user_identity(spec), ecr_statements(spec.image, spec.registry_auth), spec.secret_refs)
    print(spec.identity["azure"], spec.idnetity)  # typo
    print(ecr_statements(spec.profile_json, None))  # typo
    target = target_from_offer(offer)
    print(render_script(loaded, target).payload, build_context(loaded, target).profile_name)
    print(render_script(loaded.profile, target))  # typo
    print(build_context(loaded, target_from_offer(offer.instance_type)))  # typo
    ctx = build_context(loaded, target)
    if ctx.container is not None:
        print(ctx.container.image, ctx.container.imgae)  # typo
'''


def test_a_misspelled_attribute_on_a_stage_boundary_is_a_mypy_error(tmp_path) -> None:
    errors, typos, out = mypy_typo_lines(SNIPPET, tmp_path)
    assert len(typos) == 16
    assert errors == typos, out
