"""Loading: line numbers, extends (relative, TRAINVM_PROFILE_PATH, cycles), hash stability, field checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.errors import InputError, ProfileError
from provisioner.profile import load_profile
from tests.helpers import BASE_PROFILE as BASE
from tests.helpers import BASES, EXAMPLES


def errors_of(path: Path) -> list[str]:
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    return [m.render() for m in info.value.messages if m.level == "error"]


@pytest.mark.parametrize("path", EXAMPLES + BASES, ids=lambda p: p.name)
def test_bundled_profiles_validate(path: Path) -> None:
    loaded = load_profile(path)
    assert len(loaded.hash) == 64


def test_error_names_file_line_and_field(write_yaml) -> None:
    path = write_yaml(BASE.replace("  driver: \"550.127.05\"", "  driver: \"470.256.02\""))
    errs = errors_of(path)
    assert any(e.startswith(f"{path}:4: stack.driver: 470.256.02 is older than 525.60.13, the minimum for CUDA 12.x (NVIDIA") for e in errs), errs


def test_unknown_key_with_did_you_mean(write_yaml) -> None:
    path = write_yaml(BASE + "  gpu_cnt: 2\n")
    assert any(f"{path}:11: hardware.gpu_cnt: unknown key; did you mean 'gpu_count'?" == e for e in errors_of(path))


def test_gpu_did_you_mean(write_yaml) -> None:
    path = write_yaml(BASE.replace("gpu: T4", "gpu: A1OO"))
    assert any("did you mean A100" in e and ":10: hardware.gpu[0]" in e for e in errors_of(path))


def test_workstation_gpu_rejected_with_hint(write_yaml) -> None:
    path = write_yaml(BASE.replace("gpu: T4", "gpu: RTX-4090"))
    assert any("workstation GPU" in e for e in errors_of(path))


@pytest.mark.parametrize(
    "line,fragment",
    [
        ("  packages: [torch>=2.4]", "must be pinned exactly with =="),
        ("  packages: ['torch==2.*']", "must be pinned exactly"),
        ("  packages: [torch==2.4.1+cu124, Torch==2.4.1+cu124]", "pinned twice"),
        ("  packages: ['torch @ https://x/y.whl']", "direct URLs"),
        ("  python: \"3.11\"", "exact Python version"),
        ("  driver: \"550\"", "exact NVIDIA driver version"),
        ("  os: ubuntu-20.04", "Input should be"),
    ],
)
def test_strict_values(write_yaml, line: str, fragment: str) -> None:
    key = line.split(":")[0]
    text = "\n".join(line if ln.startswith(key + ":") else ln for ln in BASE.splitlines()) + "\n"
    assert any(fragment in e for e in errors_of(write_yaml(text))), errors_of(write_yaml(text))


@pytest.mark.parametrize(
    "key,value,what",
    [
        ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", "AWS access key"),
        ("X", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS secret access key"),
        ("GOOGLE_CREDS", '{"type": "service_account", "private_key": "x"}', "service-account"),
        ("KEY", "-----BEGIN RSA PRIVATE KEY-----abc", "private key"),
        ("GH", "ghp_" + "a" * 36, "GitHub token"),
        ("HF", "hf_" + "a" * 34, "Hugging Face token"),
        ("WANDB_API_KEY", "0123456789abcdef0123", "secret (the variable is named WANDB_API_KEY)"),
    ],
)
def test_credentials_in_env_rejected(write_yaml, key: str, value: str, what: str) -> None:
    import json

    path = write_yaml(BASE.replace('env: {PYTHONHASHSEED: "0"}', f"env: {{{key}: {json.dumps(value)}}}"))
    errs = errors_of(path)
    assert any(what in e and "secret://" in e for e in errs), errs


def test_secret_references_and_harmless_hashes_allowed(write_yaml) -> None:
    env = 'env: {HF_TOKEN: "secret://gcp/hf-token", GIT_SHA: "0123456789abcdef0123456789abcdef01234567", CUBLAS_WORKSPACE_CONFIG: ":4096:8"}'
    load_profile(write_yaml(BASE.replace('env: {PYTHONHASHSEED: "0"}', env)))


def test_extends_relative_and_child_wins_lists_replaced(write_yaml, tmp_path: Path) -> None:
    write_yaml(BASE, "team/base.yaml")
    child = write_yaml(
        "name: child\nextends: team/base.yaml\nstack:\n  packages: [torch==2.4.1+cu124, numpy==2.0.1]\nhardware: {gpu_count: 2}\n",
        "child.yaml",
    )
    p = load_profile(child).profile
    assert p.name == "child" and p.stack.driver == "550.127.05"
    assert p.stack.packages == ["torch==2.4.1+cu124", "numpy==2.0.1"]
    assert p.hardware.gpu == ["T4"] and p.hardware.gpu_count == 2
    assert p.stack.env == {"PYTHONHASHSEED": "0"}


def test_extends_on_profile_path_and_error_lines_in_parent(write_yaml, tmp_path: Path, monkeypatch) -> None:
    repo = tmp_path / "profile-repo"
    write_yaml(BASE.replace("gpu: T4", "gpu: K80"), "base/torch.yaml", folder=repo)
    monkeypatch.setenv("TRAINVM_PROFILE_PATH", f"/nonexistent:{repo}")
    child = write_yaml("name: c\nextends: base/torch\n", "work/c.yaml")
    errs = errors_of(child)
    assert any(e.startswith(f"{repo / 'base' / 'torch.yaml'}:4: stack.driver") for e in errs), errs


def test_extends_missing_parent_and_cycle(write_yaml) -> None:
    missing = write_yaml("name: c\nextends: nowhere/to-be-found\n", "m.yaml")
    assert any(":2: extends: parent profile 'nowhere/to-be-found' not found" in e for e in errors_of(missing))
    write_yaml("name: a\nextends: b.yaml\n", "a.yaml")
    cyc = write_yaml("name: b\nextends: a.yaml\n", "b.yaml")
    assert any("extends cycle" in e for e in errors_of(cyc))


def test_hash_stable_across_key_order_comments_and_extends_layout(write_yaml) -> None:
    flat = write_yaml(BASE, "flat.yaml")
    reordered = write_yaml(
        "# a comment\nhardware:\n  gpu: [T4]   # same as gpu: T4\n  gpu_count: 1\nstack:\n  env: {PYTHONHASHSEED: '0'}\n"
        "  packages: [torch==2.4.1+cu124]\n  python: 3.11.9\n  cuda: '12.4'\n  driver: 550.127.05\n  os: ubuntu-22.04\nname: base-stack\n",
        "reordered.yaml",
    )
    write_yaml("name: zzz\nstack:\n  os: ubuntu-22.04\n  driver: '550.127.05'\n  python: 3.11.9\n", "parent.yaml")
    split = write_yaml(
        "name: base-stack\nextends: parent.yaml\nhardware: {gpu: T4}\nstack:\n  cuda: '12.4'\n  packages: [torch==2.4.1+cu124]\n  env: {PYTHONHASHSEED: '0'}\n",
        "split.yaml",
    )
    hashes = {load_profile(p).hash for p in (flat, reordered, split)}
    assert len(hashes) == 1
    changed = write_yaml(BASE.replace("3.11.9", "3.11.8"), "changed.yaml")
    assert load_profile(changed).hash not in hashes


def test_requirements_lock_must_exist_be_hashed_and_feeds_the_hash(write_yaml, tmp_path: Path) -> None:
    text = BASE + "  requirements: requirements.lock\n".replace("  req", "  req")
    text = BASE.replace("  env:", "  requirements: requirements.lock\n  env:")
    path = write_yaml(text)
    assert any("lock file requirements.lock not found" in e for e in errors_of(path))
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy==2.0.1\n")
    assert any("no --hash=sha256:" in e for e in errors_of(path))
    lock.write_text("numpy==2.0.1 \\\n    --hash=sha256:" + "a" * 64 + "\n")
    h1 = load_profile(path).hash
    lock.write_text("numpy==2.0.2 \\\n    --hash=sha256:" + "b" * 64 + "\n")
    assert load_profile(path).hash != h1


@pytest.mark.parametrize(
    "text,fragment",
    [("name: [x\n", "YAML syntax error"), ("", "empty"), ("- a\n- b\n", "YAML mapping"), ("a: 1\na: 2\n", "duplicate")],
)
def test_unparsable_yaml_is_input_error_with_line(write_yaml, text: str, fragment: str) -> None:
    with pytest.raises(InputError) as info:
        load_profile(write_yaml(text))
    assert fragment in str(info.value).lower() or fragment in str(info.value)


def test_missing_file_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError):
        load_profile(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    "env,fragment",
    [
        ('{BASH_ENV: "/tmp/x"}', "cannot be set from a profile"),
        ('{LD_PRELOAD: "/tmp/x.so"}', "cannot be set from a profile"),
        ('{BASH_FUNC_x: "() { id; }"}', "cannot be set from a profile"),
        ('{A: "x\\u2028y"}', "printable"),
        ('{A: "a\\u202eb"}', "printable"),
    ],
)
def test_env_that_could_run_code_is_rejected(write_yaml, env: str, fragment: str) -> None:
    path = write_yaml(BASE.replace('env: {PYTHONHASHSEED: "0"}', f"env: {env}"))
    assert any(fragment in e for e in errors_of(path)), errors_of(path)


@pytest.mark.parametrize(
    "data,fragment",
    [
        ("{source: 'gs://bkt/x/', dest: /opt/trainvm/venv}", "system or trainvm directory"),
        ("{source: 'gs://bkt/x/', dest: /etc/cron.d}", "system or trainvm directory"),
        ("{source: 'az://Bad_Account/c/p', dest: /mnt/data/x}", "not a valid storage account"),
        ("{source: 'az://account/Bad--c/p', dest: /mnt/data/x}", "container"),
        ("{source: 'gs://bucket/*.tfrecord', dest: /mnt/data/x}", "wildcards"),
        ("{source: 's3://B/x', dest: /mnt/data/x}", "not a valid bucket"),
    ],
)
def test_data_entries_checked(write_yaml, data: str, fragment: str) -> None:
    path = write_yaml(BASE + f"data:\n  - {data}\n")
    assert any(fragment in e for e in errors_of(path)), errors_of(path)


def test_lock_file_limits(write_yaml, tmp_path: Path) -> None:
    path = write_yaml(BASE.replace("  env:", "  requirements: requirements.lock\n  env:"))
    lock = tmp_path / "requirements.lock"
    lock.write_bytes(b"numpy==2.0.1 --hash=sha256:" + b"a" * 64 + b"\n\x00")
    assert any("control characters" in e for e in errors_of(path))
    lock.write_bytes(b"\xff\xfe numpy==1 --hash=sha256:")
    assert any("not UTF-8" in e for e in errors_of(path))
    lock.write_text("numpy==2.0.1 --hash=sha256:" + "a" * 64 + "\n" + "# pad\n" * 40000)  # 240 KB: fine now
    assert load_profile(path).requirements_path == lock  # it travels in the payload, not in user data
    lock.write_text("numpy==2.0.1 --hash=sha256:" + "a" * 64 + "\n" + "# pad\n" * 1_400_000)  # 8.4 MB: a bounded read
    assert any("reads lock files of at most 8,000,000 bytes" in e for e in errors_of(path))


@pytest.mark.parametrize(
    "value,fragment",
    [
        ("fe80::1%$(reboot)/128", "IPv6 scope ids"),  # issue 19: accepted before, and reached firewall rules
        ("fe80::1%eth0", "IPv6 scope ids"),
        ("0.0.0.0/0", "whole internet"),
        ("10.0.0.1/8", "is not a CIDR block"),
    ],
)
def test_ssh_from_scope_ids_and_open_ranges_rejected(write_yaml, value: str, fragment: str) -> None:
    import json

    errs = errors_of(write_yaml(BASE + f"placement:\n  ssh_from: {json.dumps(value)}\n"))
    assert any("ssh_from" in e and fragment in e for e in errs), errs
