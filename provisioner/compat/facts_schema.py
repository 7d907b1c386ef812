"""The shape of each compatibility facts file (``provisioner/compat/data/*.yaml``, or ``TRAINVM_FACTS_DIR``'s).

Frozen pydantic models, unknown keys refused: a malformed facts file is an input error naming the file, the
line and the field (``cuda.yaml:31: releases.12.4.min_driver: Input should be a string``), never a
traceback deep in a rule. compat/facts.py turns the validated documents into its typed tables; this module
is imported only when the facts are parsed (a cache miss: provisioner/cache.py), not on every run.

Version-like values (``min_driver``, ``glibc``, ``cuda``...) must be YAML strings: an unquoted ``2.30`` is
the number 2.3, so it is refused rather than silently read as another version. A compute capability
(``cc``, ``min_cc``, ``ptx``) may be written either way (``"8.6"`` or ``8.6``), as before.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError, field_validator
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from provisioner.compat.facts import parse_arch
from provisioner.errors import InputError
from provisioner.yamlsource import read_yaml


class _Doc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def _cc_text(raw: Any) -> Any:
    return str(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else raw


CC = Annotated[str, BeforeValidator(_cc_text), StringConstraints(pattern=r"^\d+(\.\d+)?$")]
Sources = dict[str, str]
Text = Annotated[str, StringConstraints(min_length=1)]
ArchList = list[int | str] | str


def _check_arch(raw: ArchList | None) -> ArchList | None:
    try:
        parse_arch(raw)
    except ValueError:
        raise ValueError(f"not an arch list ({raw!r}): use 86, \"8.6\", \"120+PTX\", \"sm_90a\" or \"compute_90\" entries") from None
    return raw


# ------------------------------------------------------------------ gpus.yaml
class GpuEntry(_Doc):
    vendor: Text
    arch: Text
    memory_gib: float = Field(gt=0)  # 16 or 16.0
    cc: CC | None = None
    last_branch: int | None = None
    min_driver: Text | None = None
    modules: Literal["open", "proprietary"] | None = None
    cloud: bool = True


class GpusDoc(_Doc):
    sources: Sources
    gpus: dict[str, GpuEntry]
    aliases: dict[str, str] | None = None


# ------------------------------------------------------------------ cuda.yaml
class CudaFamily(_Doc):
    floor: Text


class CudaReleaseDoc(_Doc):
    min_driver: Text
    cc: tuple[CC, CC] = Field(strict=False)  # [lowest, highest]: a YAML list


class CudaDoc(_Doc):
    sources: Sources
    families: dict[str, CudaFamily]
    releases: dict[str, CudaReleaseDoc]


# ------------------------------------------------------------------ torch.yaml
class TorchVariantDoc(_Doc):
    arch: ArchList
    cudnn: Text | None = None
    arch_source: Text | None = None

    _arch = field_validator("arch")(_check_arch)


class TorchVersionDoc(_Doc):
    python: list[str]
    pypi_default: Annotated[str, StringConstraints(pattern=r"^cu\d{3}$")]
    glibc: Text
    variants: dict[Annotated[str, StringConstraints(pattern=r"^cu\d{3}$")], TorchVariantDoc]
    arch_source: Text | None = None


class TorchDoc(_Doc):
    sources: Sources
    versions: dict[str, TorchVersionDoc]


# ------------------------------------------------------------------ tensorflow.yaml
class TfVersionDoc(_Doc):
    python: list[str]
    cuda: Text
    cudnn: Text
    glibc: Text
    min_cc: CC | None = None
    ptx: CC | None = None
    and_cuda: bool = False
    arch: ArchList | None = None
    arch_source: Text | None = None

    _arch = field_validator("arch")(_check_arch)


class TfDoc(_Doc):
    sources: Sources
    versions: dict[str, TfVersionDoc]


# ------------------------------------------------------------------ jax.yaml
class JaxExtraDoc(_Doc):
    cuda_major: Text
    min_cuda: Text
    min_driver: Text
    min_cc: CC
    cudnn: list[str]
    arch: ArchList | None = None
    arch_source: Text | None = None

    _arch = field_validator("arch")(_check_arch)


class JaxPythonFloor(_Doc):
    versions: Text
    python_min: Text

    @field_validator("versions")
    @classmethod
    def _specifier(cls, v: str) -> str:
        try:
            SpecifierSet(v)
        except InvalidSpecifier:
            raise ValueError(f"not a version specifier ({v!r}): e.g. \">=0.4.31\"") from None
        return v


class JaxDoc(_Doc):
    sources: Sources
    extras: dict[str, JaxExtraDoc]
    python_floor: list[JaxPythonFloor]
    glibc: Text


# ------------------------------------------------------------------ os.yaml
class OsEntry(_Doc):
    glibc: Text
    nvidia_repo: Text


class OsDoc(_Doc):
    sources: Sources
    os: dict[str, OsEntry]


DOCS: dict[str, type[_Doc]] = {"gpus": GpusDoc, "cuda": CudaDoc, "torch": TorchDoc, "tensorflow": TfDoc,
                               "jax": JaxDoc, "os": OsDoc}


def load_doc(path: Path, model: type[_Doc]) -> Any:
    """``path`` validated against ``model``; every problem as ``file:line: field: message`` (InputError, exit 2).

    Read with the fast safe loader; only a file that fails is read again with line numbers (provisioner/yamlsource.py's
    reader, which also locates YAML syntax errors), so a valid file costs what the hand mapping did."""
    try:
        with path.open(encoding="utf-8") as fh:
            return model.model_validate(YAML(typ="safe").load(fh))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the facts file: {exc.strerror or exc}",
                         hint="TRAINVM_FACTS_DIR must hold gpus, cuda, torch, tensorflow, jax and os .yaml") from None
    except (YAMLError, UnicodeDecodeError, ValidationError):
        pass
    doc = read_yaml(path)  # raises the located syntax error, if that was it
    try:
        model.model_validate(doc.data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors(include_url=False):
            loc = tuple(err["loc"])
            file, line = doc.where(loc)
            where = f"{file}:{line}" if line else f"{file or path}"
            field = ".".join(str(p) for p in loc if not _UNION_TAG.match(str(p))) or "(document)"
            msg = str(err["msg"]).removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown key"
            elif err["type"] == "missing":
                msg = "required field is missing"
            lines.append(f"{where}: {field}: {msg}")
        raise InputError("\n".join(dict.fromkeys(lines)),
                         hint="fix the facts file (TRAINVM_FACTS_DIR points at its folder)") from None
    raise InputError(f"{path}: not a valid facts file")  # the safe loader refused what the line-keeping one read


#: pydantic's union-branch and validator tags in an error location ("list[union[int,str]]", "function-after[...]")
_UNION_TAG = re.compile(r"^(list|dict|tuple|union|function-\w+|str|int|float|bool|constrained-str)\[.*\]$|^(int|str)$")
