"""ScriptContext: the values precomputed in Python (module flavour, repository, keyring, index
URL, fabric manager, kernel packages, data placement, expected manifest)."""

from __future__ import annotations

import json

import pytest
import trainvm_render_support as S

from provisioner.errors import RenderError
from provisioner.render import RenderTarget, build_context, is_nvswitch_shape
from provisioner.render.install import KEYRING_SHA256


@pytest.mark.parametrize(("cloud", "itype", "gpu", "count", "expected"), [
    ("gcp", "a2-highgpu-8g", "A100", 8, True),
    ("gcp", "a2-ultragpu-8g", "A100-80GB", 8, True),
    ("gcp", "a3-highgpu-8g", "H100", 8, True),
    ("gcp", "a3-megagpu-8g", "H100", 8, True),
    ("gcp", "a4-highgpu-8g", "B200", 8, True),
    ("gcp", "a2-highgpu-4g", "A100", 4, False),
    ("gcp", "g2-standard-96", "L4", 8, False),
    ("azure", "Standard_ND96asr_v4", "A100", 8, True),
    ("azure", "Standard_ND96isr_H100_v5", "H100", 8, True),
    ("azure", "Standard_NC96ads_A100_v4", "A100-80GB", 4, False),
    ("aws", "p4d.24xlarge", "A100", 8, True),
    ("aws", "p5.48xlarge", "H100", 8, True),
    ("aws", "g5.48xlarge", "A10G", 8, False),
])
def test_nvswitch_shapes(cloud, itype, gpu, count, expected):
    assert is_nvswitch_shape(cloud, itype, gpu, count) is expected
    assert RenderTarget(cloud, itype, gpu, count, "r").nvswitch is expected
    assert RenderTarget(cloud, itype, gpu, count, "r", nvswitch=not expected).nvswitch is (not expected)


def _ctx(gpu="T4", cloud="gcp", count=1, itype="n1-standard-8", **stack):
    lp = S.from_dict(S.minimal_profile(**stack))
    return build_context(lp, RenderTarget(cloud, itype, gpu, count, "us-central1"))


def test_module_flavour_follows_the_gpu_architecture():
    assert (_ctx("T4").driver_pkg, _ctx("T4").modules) == ("nvidia-open", "open")
    assert (_ctx("V100").driver_pkg, _ctx("V100").modules) == ("cuda-drivers", "proprietary")
    assert _ctx("P4").driver_pkg == "cuda-drivers"
    assert _ctx("H100", count=8, itype="a3-highgpu-8g", driver="550.127.05").driver_pkg == "nvidia-open"


def test_fabric_manager_package_name_by_branch():
    assert _ctx("T4").fabricmanager_pkg == ""
    assert _ctx("A100", count=8, itype="a2-highgpu-8g").fabricmanager_pkg == "nvidia-fabricmanager-550"
    ctx = _ctx("H100", count=8, itype="a3-highgpu-8g", driver="580.95.05", cuda="13.0", python="3.12.7",
               packages=["torch==2.11.0+cu130"])
    assert ctx.fabricmanager_pkg == "nvidia-fabricmanager"


@pytest.mark.parametrize(("os_name", "repo"), [("ubuntu-22.04", "ubuntu2204"), ("ubuntu-24.04", "ubuntu2404"), ("debian-12", "debian12")])
def test_repository_and_keyring_per_os(os_name, repo):
    ctx = _ctx(os=os_name)
    assert ctx.nvidia_repo == repo and ctx.keyring_sha256 == KEYRING_SHA256[repo]


def test_kernel_packages_per_cloud_and_os():
    assert _ctx().kernel_hold == ("linux-gcp", "linux-image-gcp", "linux-headers-gcp")
    assert _ctx(cloud="azure", itype="Standard_NC8as_T4_v3").kernel_hold == ("linux-azure", "linux-image-azure", "linux-headers-azure")
    assert not hasattr(_ctx(), "kernel_headers_meta")  # only the running kernel's headers are installed
    assert _ctx(os="debian-12").kernel_hold == ("linux-image-cloud-amd64", "linux-headers-cloud-amd64")


def test_torch_index_follows_the_cuda_variant():
    assert _ctx().torch_index == "https://download.pytorch.org/whl/cu124"
    assert _ctx(packages=["torch==2.4.1+cu121", "torchvision==0.19.1+cu121"], cuda="12.1").torch_index == "https://download.pytorch.org/whl/cu121"
    assert _ctx(packages=["torch==2.4.1", "numpy==1.26.4"], cuda="12.1").torch_index == ""
    with pytest.raises(RenderError, match="mix PyTorch builds"):
        _ctx(packages=["torch==2.4.1+cu124", "torchvision==0.19.1+cu121"])


def test_toolkit_and_cudnn_packages_only_when_asked():
    assert _ctx().toolkit_pkg == "" and _ctx().cudnn_pkg == ""
    ctx = _ctx(cuda_toolkit=True, cudnn="9.1.0")
    assert (ctx.toolkit_pkg, ctx.cudnn_pkg, ctx.cudnn_dev_pkg, ctx.cudnn_prefix) == (
        "cuda-toolkit-12-4", "libcudnn9-cuda-12", "libcudnn9-dev-cuda-12", "9.1.0.")
    legacy = _ctx(cuda_toolkit=True, cudnn="8.9", cuda="12.2", driver="535.216.03", packages=["tensorflow[and-cuda]==2.15.1"])
    assert (legacy.cudnn_pkg, legacy.cudnn_contains) == ("libcudnn8", "+cuda12.")


def test_expected_manifest_is_the_expectation_verify_uses():
    from provisioner.verify.expect import expectation

    lp = S.loaded(S.GOLDEN_PROFILE)
    ctx = build_context(lp, S.target_for("gcp", lp))
    exp = json.loads(ctx.expected_json)
    assert ctx.expected_json.isascii()
    # the VM's ready gate judges by the same document `verify` builds from the profile
    assert {k: exp[k] for k in expectation(lp.profile.model_dump(mode="json"))} == json.loads(json.dumps(expectation(lp.profile.model_dump(mode="json"))))
    assert exp["stack"]["driver"] == "550.127.05" and exp["stack"]["python"] == "3.11.9" and exp["hash"] == lp.hash
    assert exp["stack"]["framework"] == {"name": "torch", "version": "2.4.1+cu124", "gpu": True}
    assert exp["stack"]["cuda"] == "12.4" and exp["stack"]["cudnn"] == "9.1.0"
    assert exp["stack"]["packages"] == [["torch", "2.4.1+cu124"], ["transformers", "4.44.2"], ["datasets", "2.21.0"], ["accelerate", "0.34.2"]]
    assert exp["hardware"]["gpu_count"] == 1 and exp["hardware"]["gpu"] == ["T4"]
    assert exp["driver"] == "550.127.05"  # the helper's driver-pin
    assert exp["env"] == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PYTHONHASHSEED": "0"}


def test_gpu_gate_tells_the_40gb_from_the_80gb_part():
    from provisioner.agent.compare import judge

    lp = S.from_dict({**S.minimal_profile(), "hardware": {"gpu": "A100-80GB", "gpu_count": 8}})
    exp = json.loads(build_context(lp, RenderTarget("gcp", "a2-ultragpu-8g", "A100-80GB", 8, "us-central1")).expected_json)

    def verdict(name: str, mib: int) -> set[str]:
        report = {"source": "vm", "driver": exp["stack"]["driver"], "gpus": [{"name": name, "memory_mib": mib}] * 8}
        return {f.field for f in judge(exp, report, ("gpu",)) if f.drifted}

    assert verdict("NVIDIA A100-SXM4-80GB", 81920) == set()
    assert verdict("NVIDIA A100-SXM4-40GB", 40960) == {"hardware.gpu"}
    assert verdict("NVIDIA A100 PCIe", 40960) == {"hardware.gpu"}  # no size in the name: told by memory


def test_data_placement_on_local_nvme():
    lp = S.from_dict({**S.minimal_profile(), "hardware": {"gpu": "T4", "local_nvme_gib": 375},
                      "data": [{"source": "gs://bkt/x/", "dest": "/mnt/data/x"}, {"source": "az://acct/cont/p/", "dest": "/data/y"},
                               {"source": "https://example.com/files/set.tar?x=1", "dest": "/mnt/data/z"}]})
    ctx = build_context(lp, RenderTarget("gcp", "n1-standard-8", "T4", 1, "us-central1"))
    assert ctx.nvme == "required" and ctx.scratch == "/mnt/trainvm"  # no common, non-system parent
    x, y, z = ctx.data
    assert (x.stage, y.stage) == ("/mnt/trainvm/data0", "/mnt/trainvm/data1")
    assert (x.tool, y.tool, z.tool) == ("gs", "az", "")  # https:// is curl's
    assert [t.scheme for t in ctx.datatools] == [] and "az://acct/cont/p/" in ctx.data_unreadable  # az:// on GCE: no credential
    assert z.file_name == "set.tar"
    one = build_context(S.loaded(S.LARGEST_PROFILE), S.target_for("gcp", S.loaded(S.LARGEST_PROFILE)))
    assert one.scratch == "/mnt/data" and one.data[0].stage == "/mnt/data/corpus"
    none = build_context(S.loaded(S.GOLDEN_PROFILE), S.target_for("gcp", S.loaded(S.GOLDEN_PROFILE)))
    assert none.nvme == "none" and none.scratch == ""


@pytest.mark.parametrize(("change", "message"), [
    ({"stack": {"env": {"PROMPT_COMMAND": "echo hi"}}}, "execute this variable"),
    ({"stack": {"env": {"LD_PRELOAD": "/tmp/x.so"}}}, "execute this variable"),
    ({"data": [{"source": "gs://b/x/", "dest": "/var/lib/trainvm/x"}]}, "system or trainvm folder"),
    ({"data": [{"source": "gs://b/x/", "dest": "/opt/trainvm/venv"}]}, "system or trainvm folder"),
    ({"data": [{"source": "az://evil.example.com#/c/x/", "dest": "/mnt/data/x"}]}, "storage account"),
])
def test_values_that_must_not_reach_a_vm_stop_the_render(change, message):
    prof = S.minimal_profile()
    for key, value in change.items():
        if key == "stack":
            prof["stack"].update(value)
        else:
            prof[key] = value
    with pytest.raises(RenderError, match=message):
        build_context(S.from_dict(prof, validate=False), RenderTarget("gcp", "n1-standard-8", "T4", 1, "us-central1"))


def test_target_from_offer():
    from provisioner.catalog.models import Offer
    from provisioner.render import target_from_offer

    offer = Offer(cloud="gcp", instance_type="a2-highgpu-8g", family="a2", gpu_name="A100", gpu_count=8, gpu_memory_gib=40,
                  vcpus=96, memory_gib=680, region="us-central1", zone="us-central1-a", price_hourly=29.4, spot_price_hourly=None,
                  gpu_attach="bundled", disk_types=("balanced", "ssd"), local_nvme_max_gib=3000, arch="x86_64")
    t = target_from_offer(offer)
    assert (t.cloud, t.instance_type, t.gpu_name, t.gpu_count, t.zone, t.local_nvme_gib, t.nvswitch) == (
        "gcp", "a2-highgpu-8g", "A100", 8, "us-central1-a", 3000, True)
    import dataclasses

    with pytest.raises(RenderError, match="x86_64 only"):
        target_from_offer(dataclasses.replace(offer, arch="arm64"))


def test_torch_index_is_explicit_and_serves_only_the_torch_build_pins():
    """R1: the pins reach uv as a project whose PyTorch index is explicit (only the pins with a
    +cuXXX build label come from it), not as --extra-index-url (authoritative for every name)."""
    import tomllib

    data = S.minimal_profile(packages=["torch==2.4.1+cu124", "torchvision==0.19.1+cu124", "numpy==1.26.4",
                                       "filelock==3.16.1"])
    ctx = build_context(S.from_dict(data), S.target_for("gcp", S.from_dict(data)))
    project = tomllib.loads(ctx.stack_pyproject)
    assert project["project"]["dependencies"] == data["stack"]["packages"]
    assert project["tool"]["uv"]["sources"] == {"torch": {"index": "pytorch"}, "torchvision": {"index": "pytorch"}}
    assert project["tool"]["uv"]["index"] == [{"name": "pytorch", "url": "https://download.pytorch.org/whl/cu124", "explicit": True}]
    plain = S.minimal_profile(packages=["numpy==1.26.4"])
    assert build_context(S.from_dict(plain), S.target_for("gcp", S.from_dict(plain))).stack_pyproject == ""
