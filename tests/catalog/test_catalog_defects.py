"""Each known defect of the snapshot: how the committed data and the planner treat it."""

from __future__ import annotations

from datetime import date

import pytest

from provisioner.catalog import load_catalog
from provisioner.catalog.storage import EMBEDDED_DIR
from provisioner.planner import PlanRequest, closest_offers, plan
from provisioner.planner.core import diagnose

TODAY = date(2026, 11, 22)
README = (EMBEDDED_DIR / "README.md").read_text()


@pytest.fixture(scope="module")
def cat():
    return load_catalog(EMBEDDED_DIR)


def rows(cat, **match):
    return [o for o in cat.offers if all(getattr(o, k) == v for k, v in match.items())]


def test_a4_host_price_zero_flagged_and_never_planned(cat):
    a4 = rows(cat, instance_type="a4-highgpu-8g")
    assert len(a4) == 11
    assert all("host_price_zero" in o.flags and o.excluded_by() == "flagged_price" for o in a4)
    p = plan(PlanRequest(gpu_names={"B200"}, gpu_count=8), cat, TODAY)
    assert p.chosen is None
    assert p.rejected["gcp"]["flagged_price"] == 11
    rel = closest_offers(p)
    assert any(r.reasons == ("flagged_price",) and r.offer.instance_type == "a4-highgpu-8g"
               and not r.user_relaxable for r in rel)
    assert "host_price_zero" in README


def test_azure_nd96isr_h100_v5_has_8_gpus(cat):
    nd = rows(cat, instance_type="Standard_ND96isr_H100_v5")
    assert len(nd) == 3
    assert all(o.gpu_count == 8 and o.gpu_memory_gib == 80 and "gpu_count_corrected" in o.flags
               for o in nd)
    p = plan(PlanRequest(gpu_names={"H100"}, gpu_count=8, clouds=("azure",)), cat, TODAY)
    assert p.chosen.instance_type == "Standard_ND96isr_H100_v5"
    assert plan(PlanRequest(gpu_names={"H100"}, gpu_count=12), cat, TODAY).chosen is None
    assert "ND96isr_H100_v5" in README


def test_gcp_spot_above_ondemand_has_no_spot_price(cat):
    bad = [o for o in cat.offers if "spot_above_ondemand" in o.flags]
    assert len(bad) == 20 and all(o.cloud == "gcp" for o in bad)
    assert all(o.spot_price_hourly is None for o in bad)
    # each such row sits in a region whose GPU price is also suspiciously low
    assert all("suspect_price" in o.flags for o in bad)
    p = plan(PlanRequest(gpu_names={"A100-80GB"}, spot=True), cat, TODAY)
    assert p.chosen is not None and "spot_above_ondemand" not in p.chosen.flags
    assert p.chosen.spot_price_hourly < p.chosen.price_hourly


def test_suspiciously_low_regional_gpu_prices_are_flagged(cat):
    flagged = {(o.instance_type, o.region) for o in cat.offers if "suspect_price" in o.flags}
    assert ("a3-highgpu-1g", "us-central1") in flagged  # $4.20/GPU-h vs $9.8-12.7 elsewhere
    assert ("a3-highgpu-1g", "us-east4") not in flagged
    assert ("a3-ultragpu-8g", "europe-west4") in flagged and ("a3-ultragpu-8g", "us-central1") \
        not in flagged
    assert not any(t.startswith(("g2-", "n1-")) for t, _ in flagged)  # L4/T4 spreads are normal
    assert all(o.cloud == "gcp" for o in cat.offers if "suspect_price" in o.flags)
    p = plan(PlanRequest(gpu_names={"H100"}, clouds=("gcp",)), cat, TODAY)
    assert "suspect_price" not in p.chosen.flags
    assert p.chosen.price_hourly > 9  # not the bogus ~$4.2 GPU part + host
    assert p.cheaper_flagged and any("unreliable" in w for w in p.warnings)


def test_suspect_rule_thresholds():
    from scripts_build import suspect_low  # noqa: PLC0415  (see conftest)

    l4 = dict(enumerate([0.558, 0.56, 0.583, 0.617, 0.648, 0.691, 0.719, 0.783, 0.896]))
    assert suspect_low(l4) == set()
    b200 = {"a": 8.055, "b": 8.055, "c": 11.277}
    assert suspect_low(b200) == {"a", "b"}
    h100 = {"x": 4.2008, "y": 9.7965, "z": 12.7355}
    assert suspect_low(h100) == {"x"}
    assert suspect_low({"only": 1.0}) == set()
    nd = {"eastus": 98.32, "westus": 127.816}  # 1.30x: a real regional spread
    assert suspect_low(nd) == set()


def test_rows_without_spot_price_kept_but_not_spot_plannable(cat):
    nospot = [o for o in cat.offers if "no_spot_price" in o.flags]
    assert nospot and all(o.spot_price_hourly is None for o in nospot)
    promo = rows(cat, instance_type="Standard_NC6_Promo")
    assert promo and all("no_spot_price" in o.flags for o in promo)
    h200 = [o for o in nospot if o.gpu_name == "H200"]
    p = plan(PlanRequest(gpu_names={"H200"}, gpu_count=8, spot=True,
                         region_globs=(h200[0].region,)), cat, TODAY)
    assert p.chosen is None or p.chosen.spot_price_hourly is not None
    # a row without a spot price is never spot-plannable, whatever else rules it out
    spot_req = PlanRequest(gpu_count=1, spot=True)
    assert all("spot_unavailable" in diagnose(o, spot_req) for o in nospot)
    assert not any("spot_unavailable" in diagnose(o, PlanRequest(gpu_count=1, spot=False)) for o in nospot)


def test_rows_without_ondemand_price_are_dropped(tmp_path):
    from scripts_build import INPUT_COLUMNS, build  # noqa: PLC0415

    src = tmp_path / "snap"
    src.mkdir()
    head = ",".join(INPUT_COLUMNS)
    (src / "gcp.csv").write_text(
        head + "\n"
        "gcp,g2-standard-8,L4,1,us-central1,us-central1-a,8.0,32.0,24.0,,0.3,bundled,0.3,0.5,,\n"
        "gcp,g2-standard-8,L4,1,us-central1,us-central1-b,8.0,32.0,24.0,0.0,0.3,bundled,0.3,0.5,,\n"
        "gcp,g2-standard-8,L4,1,us-central1,us-central1-c,8.0,32.0,24.0,0.85,,bundled,0.3,0.55,,\n"
        "gcp,n1-standard-1,,0,us-central1,us-central1-c,1.0,3.75,,0.05,0.01,none,,,,\n")
    (src / "azure.csv").write_text(
        head + "\n"
        "azure,Standard_NC4as_T4_v3,T4,1,eastus,,4.0,28.0,16,0.526,0.526,bundled,,,\"V1,V2\",\n")
    (src / "aws.csv").write_text(
        head + "\n"
        "aws,g6.xlarge,L4,1,us-east-1,use1-az1,4.0,16.0,22.3515625,0.8048,0.3,bundled,,,x86_64,\n")
    out = tmp_path / "out"
    stats = build(src, out)
    assert stats["dropped"]["gcp"] == {"cpu_only": 1, "no_ondemand_price": 2}
    cat = load_catalog(out)
    (g2,) = [o for o in cat.offers if o.cloud == "gcp"]
    assert g2.zone == "us-central1-c" and g2.spot_price_hourly is None
    assert g2.flags == ("no_spot_price",)
    (nc,) = [o for o in cat.offers if o.cloud == "azure"]
    assert nc.spot_price_hourly is None and nc.flags == ("spot_equals_ondemand",)
    (g6,) = [o for o in cat.offers if o.cloud == "aws"]
    assert g6.gpu_memory_gib == 24


def test_p100_x4_zone_limit(cat):
    for zone in ("us-east1-c", "europe-west1-b", "europe-west1-d"):
        big = [o for o in rows(cat, zone=zone, gpu_name="P100", gpu_count=4)]
        assert big and all(o.vcpus <= 64 and o.memory_gib <= 208 for o in big)
    other = rows(cat, zone="us-central1-c", gpu_name="P100", gpu_count=4)
    assert max(o.vcpus for o in other) == 96


def test_fractional_and_retired_azure_sizes_kept_out(cat):
    frac = [o for o in cat.offers if "fractional_gpu" in o.flags]
    assert {o.instance_type for o in frac} == {"Standard_NV4as_v4", "Standard_NV8as_v4",
                                               "Standard_NV16as_v4"}
    assert sorted({o.gpu_memory_gib for o in frac}) == [2, 4, 8]
    p = plan(PlanRequest(gpu_names={"MI25"}, clouds=("azure",)), cat, TODAY)
    assert p.chosen.instance_type == "Standard_NV32as_v4"
    retired = {o.instance_type for o in cat.offers if "retired_size" in o.flags}
    assert {"Standard_NC6", "Standard_NC6_Promo", "Standard_NV6", "Standard_NC6s_v3",
            "Standard_NC24rs_v3"} <= retired
    assert not retired & {"Standard_NC4as_T4_v3", "Standard_NV12s_v3", "Standard_ND40rs_v2"}
    p = plan(PlanRequest(gpu_names={"K80"}, clouds=("azure",)), cat, TODAY)
    assert p.chosen is None and set(p.rejected["azure"]) >= {"retired"}


def test_rows_of_a_cloud_without_a_provider_are_shown_but_not_provisionable(cat):
    # provisionability is the registry's, decided at plan time; here a what-if where AWS has no provider
    aws = rows(cat, cloud="aws")
    without_aws = frozenset({"gcp", "azure"})
    assert len(aws) == 1380
    p = plan(PlanRequest(gpu_names={"A10G"}, clouds=("gcp", "azure", "aws"), provisionable_clouds=without_aws), cat, TODAY)
    assert p.chosen is None and p.rejected["aws"]["not_provisionable"] > 0
    p = plan(PlanRequest(gpu_names={"A10G"}, clouds=("aws",), include_unprovisionable=True,
                         provisionable_clouds=without_aws), cat, TODAY)
    assert p.chosen.instance_type.startswith("g5.") and p.warnings


def test_h100_mega_is_an_h100_on_a3_megagpu(cat):
    mega = rows(cat, instance_type="a3-megagpu-8g")
    assert mega and all(o.gpu_name == "H100" and o.gpu_count == 8 for o in mega)
    assert not any(o.gpu_name == "H100-MEGA" for o in cat.offers)


def test_readme_documents_every_decision():
    for word in ("cpu_only", "no_spot_price", "host_price_zero", "spot_above_ondemand",
                 "suspect_price", "ND96isr_H100_v5", "fractional_gpu", "retired_size",
                 "P100", "float", "nominal", "TRAINVM_CATALOG", "hyperdisk"):
        assert word.lower() in README.lower(), word
