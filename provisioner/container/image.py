"""What an image's config blob says about its stack: the environment variables NVIDIA's CUDA base
images and NGC framework images set (CUDA_VERSION, NVIDIA_REQUIRE_CUDA, CUDNN_VERSION, ...), the
platform and the compressed size (sum of the manifest's layer sizes). ``ImageFacts`` is also the
record ``trainvm lock`` writes: ``to_record`` / ``from_record`` round-trip it as plain JSON."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Env keys read from the config (the NGC/CUDA-image names), in report order.
ENV_KEYS = (
    "CUDA_VERSION", "CUDA_DRIVER_VERSION", "CUDNN_VERSION", "NCCL_VERSION", "PYTORCH_VERSION",
    "TENSORFLOW_VERSION", "JAX_VERSION", "TORCH_CUDA_ARCH_LIST", "NVIDIA_REQUIRE_CUDA",
    "NVIDIA_PRODUCT_NAME", "NVIDIA_PYTORCH_VERSION", "NVIDIA_TENSORFLOW_VERSION",
)
MAX_ENV_VALUE = 4096
_ARCH_TOKEN = re.compile(r"^(\d+)\.(\d+)([a-z]?)(\+PTX)?$")


class ImageFacts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built on first use: `plan` needs no image facts

    image: str = Field(description="The reference as resolved: REGISTRY/REPO:TAG@sha256:DIGEST")
    digest: str = Field(description="Digest of what `docker pull IMAGE@DIGEST` fetches (an index when the tag names one)")
    manifest_digest: str = Field(description="Digest of the linux/amd64 image manifest")
    config_digest: str
    os: str
    architecture: str
    compressed_size: int = Field(ge=0, description="Sum of the layer sizes in bytes (what a pull downloads)")
    env: dict[str, str] = Field(default_factory=dict, description="The ENV_KEYS the config sets")
    entrypoint: list[str] | None = None

    def get(self, key: str) -> str | None:
        return self.env.get(key)

    @property
    def cuda(self) -> str | None:
        """CUDA major.minor from CUDA_VERSION (12.6.0 -> 12.6)."""
        raw = self.env.get("CUDA_VERSION", "")
        m = re.match(r"^(\d+)\.(\d+)", raw)
        return f"{m[1]}.{m[2]}" if m else None

    @property
    def framework(self) -> tuple[str, str] | None:
        for key, name in (("PYTORCH_VERSION", "torch"), ("TENSORFLOW_VERSION", "tensorflow"), ("JAX_VERSION", "jax")):
            if self.env.get(key):
                return name, self.env[key]
        return None

    @property
    def arch_list(self) -> tuple[tuple[int, bool], ...] | None:
        """TORCH_CUDA_ARCH_LIST as (sm, ptx) pairs ("8.0 9.0+PTX" -> (80, False), (90, True)); None when unset.
        Architecture-specific suffixes (9.0a, 10.0f) count as their base SASS."""
        raw = self.env.get("TORCH_CUDA_ARCH_LIST")
        if not raw:
            return None
        out = []
        for token in re.split(r"[;\s]+", raw.strip()):
            m = _ARCH_TOKEN.match(token)
            if m:
                out.append((int(m[1]) * 10 + int(m[2]), bool(m[4])))
        return tuple(out) or None

    def to_record(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> ImageFacts:
        return cls.model_validate(data)


def env_facts(config: dict[str, Any]) -> dict[str, str]:
    """The ENV_KEYS from an OCI/Docker image config (``config.Env`` is a list of KEY=VALUE)."""
    inner = config.get("config") or {}
    env = inner.get("Env") or [] if isinstance(inner, dict) else []
    out: dict[str, str] = {}
    if not isinstance(env, list):
        return out
    for item in env:
        if not isinstance(item, str) or "=" not in item:
            continue
        key, value = item.split("=", 1)
        if key in ENV_KEYS and len(value) <= MAX_ENV_VALUE and value.isprintable():
            out[key] = value
    return out


def entrypoint(config: dict[str, Any]) -> list[str] | None:
    inner = config.get("config") or {}
    value = inner.get("Entrypoint") if isinstance(inner, dict) else None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None
