"""The profile format (SPEC "Profile format"): pydantic v2, frozen, unknown keys are errors."""

from __future__ import annotations

from typing import Annotated, Literal, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)

from provisioner.compat.facts import load_facts
from provisioner.hooks import check_identity
from provisioner.profile import fields as f
from provisioner.providers.registry import (
    CloudName,
    OsName,
    default_clouds,
    identity_examples,
    provisionable_clouds,
)

#: every cloud and OS a profile may name, and the default clouds, come from the cloud registry
DEFAULT_CLOUDS = cast(tuple[CloudName, ...], default_clouds())
OPT_IN_CLOUDS = tuple(c for c in provisionable_clouds() if c not in DEFAULT_CLOUDS)
_OPT_IN = f"; opt-in: {', '.join(OPT_IN_CLOUDS)}" if OPT_IN_CLOUDS else ""
#: hardware.nodes upper bound (Azure keeps InfiniBand inside one placement group of at most 100 VMs).
MAX_NODES = 64


class Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False, validate_default=True)


SafeStr = Annotated[str, AfterValidator(f.no_control_chars)]


def _gpu_name_schema() -> dict[str, object]:
    facts = load_facts()
    names = facts.cloud_gpu_names() + [a for a, c in facts.gpu_aliases.items() if facts.gpus[c].cloud]
    return {"type": "string", "enum": names, "description": "A GPU model as clouds sell it.", "examples": ["T4", "A100-80GB"]}


GPU_NAME_SCHEMA = _gpu_name_schema()
GpuName = Annotated[str, AfterValidator(f.check_gpu_name), WithJsonSchema(GPU_NAME_SCHEMA)]


class BootDisk(Strict):
    type: Literal["standard", "balanced", "ssd"] = Field(
        "balanced", description="Boot disk class, mapped per cloud (GCE pd-standard/pd-balanced/pd-ssd or hyperdisk; Azure Standard_LRS/StandardSSD_LRS/Premium_LRS)."
    )
    size_gib: int = Field(200, ge=30, le=65536, description="Boot disk size in GiB (the OS, drivers, venv and caches live here).")


class Hardware(Strict):
    gpu: Annotated[
        list[GpuName] | None,
        BeforeValidator(lambda v: [v] if isinstance(v, str) else v),
        WithJsonSchema({"anyOf": [GPU_NAME_SCHEMA, {"type": "array", "items": GPU_NAME_SCHEMA, "minItems": 1}, {"type": "null"}]}),
    ] = Field(
        None,
        description="Acceptable GPU model(s). A name is exact: A100 is the 40 GB part. Omit to accept any GPU the stack runs on (optionally with min_gpu_memory_gib).",
        examples=["T4", ["L4", "L40S"]],
    )
    gpu_count: int = Field(1, ge=1, le=16, description="GPUs per VM.")
    nodes: int = Field(
        1, ge=1, le=MAX_NODES,
        description="Identical VMs (nodes) created together as one cluster, all on this stack, with the torchrun/MPI rendezvous variables in /etc/trainvm/env. Prices in `plan` are then per node and for the cluster.",
    )
    min_gpu_memory_gib: float | None = Field(None, gt=0, le=1024, description="Minimum memory per GPU in GiB, compared with the nominal size clouds sell (L4 24, L40S 48); usable memory can be less (L4 about 22.35), which validate and plan point out; may replace `gpu`.")
    min_vcpus: int | None = Field(None, ge=1, le=1024, description="Minimum host vCPUs. Omitted: a per-GPU default (see `trainvm plan`), so GPUs are not starved.")
    min_memory_gib: float | None = Field(None, gt=0, le=32768, description="Minimum host RAM in GiB. Omitted: a per-GPU default.")
    boot_disk: BootDisk = Field(default_factory=BootDisk, description="Boot disk type and size.")
    local_nvme_gib: int = Field(0, ge=0, le=65536, description="Local NVMe scratch for data staging in GiB; 0 = none.")

    @model_validator(mode="after")
    def _gpu_list(self) -> Hardware:
        if self.gpu is not None:
            if not self.gpu:
                raise ValueError("gpu: an empty list accepts nothing; omit the key to accept any compatible GPU")
            if len(set(self.gpu)) != len(self.gpu):
                raise ValueError("gpu: the list names a GPU twice")
        return self

    def gpu_names(self) -> tuple[str, ...] | None:
        return tuple(self.gpu) if self.gpu is not None else None


def _check_identities(value: dict[str, str]) -> dict[str, str]:
    return {cloud: check_identity(cloud, ident) for cloud, ident in value.items()}


class Placement(Strict):
    clouds: list[CloudName] = Field(
        default_factory=lambda: list(DEFAULT_CLOUDS), min_length=1, description=f"Clouds to consider (default: {', '.join(DEFAULT_CLOUDS)}{_OPT_IN})."
    )
    regions: list[Annotated[str, AfterValidator(f.check_region_glob)]] | None = Field(
        None, description="Region allow-list; shell-style globs allowed.", examples=[["us-central1", "europe-*"]]
    )
    spot: bool = Field(False, description="Use spot/preemptible capacity (cheaper, may be reclaimed).")
    max_price_per_hour: float | None = Field(None, gt=0, le=10000, description="Upper bound on the hourly running price (USD), per node (VM): the price that applies plus the boot disk and local SSD, as far as the catalog prices them.")
    max_failover_premium: float = Field(
        0.25, ge=0, le=10,
        description="When the chosen offer is stocked out, `up` fails over only to the same GPU model and count priced at most the chosen running price (compute + disks) x (1 + this); max_price_per_hour, when set, is the bound instead.",
    )
    compact: bool | None = Field(
        None,
        description="With hardware.nodes > 1: place the nodes close together (GCE compact placement policy, Azure proximity placement group, AWS cluster placement group). true: only machine families that support it (GCE N1 does not); false: no placement constraint; omitted: compact where the family supports it.",
    )
    ssh_from: Annotated[str, AfterValidator(f.check_cidr)] | None = Field(
        None, description="The only source CIDR allowed to SSH in.", examples=["203.0.113.7/32"]
    )
    identity: Annotated[dict[CloudName, str], AfterValidator(_check_identities)] | None = Field(
        None,
        description="A VM identity an administrator made once, per cloud, used instead of the one trainvm makes and grants (azure: a user-assigned managed identity's resource id, for users who may not create role assignments; docs/vm.md \"Azure without role-assignment rights\"). Unset: not part of the profile hash.",
        examples=[identity_examples()],
    )

    @model_serializer(mode="wrap")
    def _unset_identity_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """An unset identity is left out of the dump: the hash and stored profile of every older profile stay."""
        data = handler(self)
        if isinstance(data, dict) and data.get("identity") is None:
            data.pop("identity", None)
        return cast(dict[str, object], data)


class Container(Strict):
    image: Annotated[str, AfterValidator(f.check_image_ref)] = Field(
        description="Image reference REGISTRY/REPO:TAG@sha256:DIGEST (the digest is what runs; the tag is for people). `trainvm lock` resolves a tag to its digest.",
        examples=["nvcr.io/nvidia/pytorch:24.08-py3@sha256:" + "0" * 64],
    )
    run_args: list[Annotated[str, AfterValidator(f.check_run_arg)]] = Field(
        default_factory=list,
        description="Extra `docker run` arguments (trainvm already passes --gpus all, --ipc=host, --ulimit memlock=-1, the data mounts and /etc/trainvm/env).",
        examples=[["--ulimit", "stack=67108864"]],
    )
    registry_auth: Annotated[str, AfterValidator(f.check_secret_ref)] | None = Field(
        None,
        description="secret:// reference to the image registry's credential (`user:password`, or a token alone: sent with the user `$oauthtoken`, NGC's convention), read on the VM with its identity and written to a private docker config (0600) that is removed after the pull. Without it the VM logs in with its own identity to its own cloud's registry (Artifact Registry/GCR on gcp, ECR on aws, ACR on azure) and pulls anonymously elsewhere; `plan` says which (\"image pull:\").",
        examples=["secret://gcp/ngc-api-key"],
    )


class Stack(Strict):
    os: OsName = Field(description="OS image.")
    driver: Annotated[str, AfterValidator(f.check_driver)] = Field(description="Exact NVIDIA driver version.", examples=["550.127.05"])
    cuda: Annotated[str, AfterValidator(f.check_cuda)] | None = Field(
        None, description="CUDA version the framework build targets (must equal the torch local label, or the CUDA of the TensorFlow/JAX wheels). Omitted: taken from the framework pin.", examples=["12.4"]
    )
    cuda_toolkit: bool = Field(False, description="Also install the CUDA toolkit (nvcc) of that version.")
    cudnn: Annotated[str, AfterValidator(f.check_cudnn)] | None = Field(
        None, description="cuDNN version; must match the framework's bundled cuDNN at the precision given.", examples=["9.1.0"]
    )
    python: Annotated[str, AfterValidator(f.check_python)] | None = Field(
        None, description="Exact Python version (required unless stack.container is set).", examples=["3.11.9"]
    )
    packages: Annotated[list[Annotated[str, AfterValidator(f.check_package_pin)]], AfterValidator(f.check_packages)] = Field(
        default_factory=list, description="Exact pins (==) only; torch's local label (+cu124) selects its CUDA build.", examples=[["torch==2.4.1+cu124"]]
    )
    requirements: Annotated[str, AfterValidator(f.check_rel_path)] | None = Field(
        None, description="Hashed lock file (pip --require-hashes format), relative to the profile."
    )
    env: Annotated[dict[str, str], AfterValidator(f.check_env)] = Field(
        default_factory=dict,
        description="Environment for training (written to /etc/trainvm/env). Secrets are references: secret://gcp/NAME, secret://azure-keyvault/VAULT/NAME, secret://aws/NAME (AWS Secrets Manager, read in the VM's region: with AWS offers in several regions `plan` warns that it must exist in each) or secret://aws/ARN (the secret's ARN, read in its own region).",
        examples=[{"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PYTHONHASHSEED": "0"}],
    )
    # Last, so that its validator (validate_default runs it when absent too) sees the other fields.
    container: Container | None = Field(
        None, description="Run training in this container image instead of a host Python (exactly one of stack.container and stack.python)."
    )

    @field_validator("container")
    @classmethod
    def _python_or_container(cls, value: Container | None, info: ValidationInfo) -> Container | None:
        f.check_stack_kind(info.data, value is not None)
        return value


class DataItem(Strict):
    source: Annotated[str, AfterValidator(f.check_data_source)] = Field(description="gs://, az://, s3:// or https:// URL.", examples=["gs://bucket/glue/"])
    dest: Annotated[str, AfterValidator(f.check_abs_path)] = Field(description="Absolute path on the VM (on local NVMe when present).", examples=["/mnt/data/glue"])
    size_gib: float | None = Field(None, gt=0, le=1048576, description="Approximate size; `plan` then estimates the egress cost of copying it across clouds.")
    credential: Annotated[str, AfterValidator(f.check_secret_ref)] | None = Field(
        None,
        description="secret:// reference to a credential that reads this source (a service-account JSON key for gs://, JSON {aws_access_key_id, aws_secret_access_key} for s3://, a SAS token or JSON {account_key} for az://). The VM reads it with its own identity, so it makes the source readable on the cloud whose secret store holds it (secret://gcp/ on gcp, secret://azure-keyvault/ on azure, secret://aws/ on aws). Without it, a gs:// source is readable only on gcp, s3:// only on aws, az:// only on azure (https:// everywhere); `plan` rules the other clouds out.",
        examples=["secret://gcp/glue-reader-key"],
    )

    @field_validator("credential")
    @classmethod
    def _credential_needs_a_bucket(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and str(info.data.get("source", "")).startswith("https://"):
            raise ValueError("an https:// source is read without a credential (curl); a credential only reads gs://, s3:// or az://")
        return value


LIFECYCLE_ACTIONS = {
    "stop": "compute billing ends; the VM, its disks and their data stay (disks keep billing; local NVMe/scratch is lost)",
    "delete": "the VM and its disks are deleted: billing ends and nothing stays",
}
LifecycleAction = Literal["stop", "delete"]


class Lifecycle(Strict):
    idle_shutdown_minutes: int | None = Field(60, ge=5, le=10080, description="The in-VM watchdog acts (see on_idle) on a VM idle this long (null = never).")
    max_run_hours: float | None = Field(None, gt=0, le=720, description="Hard limit on run time (GCE maxRunDuration; a timer on the VM elsewhere); see on_max_run.")
    on_idle: LifecycleAction = Field("stop", description="What idle shutdown does. stop: " + LIFECYCLE_ACTIONS["stop"] + ". delete: " + LIFECYCLE_ACTIONS["delete"] + ".")
    on_max_run: LifecycleAction = Field("stop", description="What reaching max_run_hours does: stop or delete, as for on_idle.")
    idle_gpu_util_percent: int = Field(5, ge=1, le=100, description="Stalled-GPU rule: a GPU below this utilisation (nvidia-smi utilization.gpu, every GPU, sampled each minute) is not working; at or above it the VM is busy.")
    idle_gpu_minutes: int | None = Field(60, ge=5, le=10080, description="Stalled-GPU rule: a process holding the GPU (a hung training loop, an idle notebook kernel) while every GPU stays below idle_gpu_util_percent this long stops counting as busy, nor does its trainvm-run job; then idle_shutdown_minutes runs. Sessions, SSH, tmux/screen and CPU load still count (null = a GPU holder is always busy).")


class PerfProbe(Strict):
    budget_s: int = Field(90, ge=10, le=900, description="Seconds the perf probe aims to spend on the VM once the stack is ready (billed VM time).")
    data: Annotated[str, AfterValidator(f.check_abs_path)] | None = Field(
        None, description="Path the disk and loader blocks read (default: the first data dest).", examples=["/mnt/data/glue"])


class Profile(Strict):
    name: Annotated[str, AfterValidator(f.check_name)] = Field(description="Profile name: prefix of VM names and a label value.", examples=["bert-finetune"])
    extends: str | None = Field(None, description="Parent profile: a path relative to this file, a name found on TRAINVM_PROFILE_PATH or else among the profiles bundled with trainvm (e.g. base/torch-2.4-cu124), or SOURCE:path through a team source declared in trainvm.yaml.")
    hardware: Hardware = Field(default_factory=Hardware)
    placement: Placement = Field(default_factory=Placement)
    stack: Stack
    data: list[DataItem] = Field(default_factory=list)
    lifecycle: Lifecycle = Field(default_factory=Lifecycle)
    perf: PerfProbe | None = Field(None, description="Run `trainvm probe --perf` on the VM when it is ready; the result travels in report.json (`verify NAME --perf`).")

    @model_validator(mode="after")
    def _cross_fields(self) -> Profile:
        dests = [d.dest for d in self.data]
        if len(set(dests)) != len(dests):
            raise ValueError("data: two entries share one dest")
        return self
