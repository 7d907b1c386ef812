"""The container phases (stack.container) run under the stub harness: Docker Engine and the NVIDIA
Container Toolkit from their repositories (keys by fingerprint, pinned, held), the image pulled by
digest while the driver installs, nvidia-ctk, the check run through the image's entrypoint, and
its failures (compatibility mode UNAVAILABLE, Error 803/804, a framework without the GPU)."""

from __future__ import annotations

import functools
import re

import pytest
import trainvm_render_support as S

DIGEST = "sha256:" + "c" * 64
IMAGE = f"nvcr.io/nvidia/pytorch:24.08-py3@{DIGEST}"
PULL = f"nvcr.io/nvidia/pytorch@{DIGEST}"


@functools.cache
def script(os_name: str = "ubuntu-22.04", cloud: str = "gcp", run_args: tuple[str, ...] = ()) -> str:
    lp = S.from_dict(S.container_profile(os_name, run_args=list(run_args)))
    return S.render(lp, cloud).startup_sh


def test_happy_path_installs_pulls_by_digest_and_checks_inside_the_container(make_harness):
    h = make_harness(script(run_args=("--shm-size=16g",)))
    run = h.run()
    assert run.rc == 0, run.output[-3000:]
    assert run.status == "ready"
    rep = run.report
    assert set(rep["phases"]) == {"preflight", "container-engine", "driver", "cuda", "container", "env", "data", "watchdog"}
    assert rep["container"] == {"image": IMAGE, "digest": DIGEST, "repo_digests": [PULL]}
    assert rep["framework"] == {"name": "torch", "version": "2.5.0a0+872d972", "cuda": "12.6", "cudnn": "90300", "cuda_available": True}
    assert rep["cudnn"] == "9.3.0" and rep["python"] == "3.10.12"
    # repositories: keys fetched and checked by fingerprint, signed-by sources, no apt-key
    assert len(run.named("gpg")) == 2 and not run.named("apt-key")
    assert "signed-by=/etc/apt/keyrings/docker.asc] https://download.docker.com/linux/ubuntu jammy stable" in h.path("/etc/apt/sources.list.d/docker.list").read_text()
    assert "https://nvidia.github.io/libnvidia-container/stable/deb/amd64 /" in h.path("/etc/apt/sources.list.d/nvidia-container-toolkit.list").read_text()
    installs = " ".join(c.line for c in run.named("apt-get") if "install" in c.args)
    for pin in ("docker-ce=5:27.3.1-1~ubuntu.22.04~jammy", "docker-ce-cli=5:27.3.1-1~ubuntu.22.04~jammy", "containerd.io=1.7.22-1",
                "nvidia-container-toolkit=1.17.3-1", "nvidia-container-toolkit-base=1.17.3-1", "libnvidia-container1=1.17.3-1"):
        assert pin in installs
    held = " ".join(run.lines("apt-mark"))
    assert "docker-ce" in held and "nvidia-container-toolkit" in held and "libnvidia-container1" in held
    # the pull (by digest) starts before the driver is installed
    lines = [c.line for c in run.calls]
    pull = next(i for i, ln in enumerate(lines) if ln.startswith("docker\tpull") or ln == f"docker pull {PULL}")
    driver = next(i for i, ln in enumerate(lines) if "nvidia-open=" in ln)
    assert pull < driver
    assert run.lines("nvidia-ctk") == ["nvidia-ctk runtime configure --runtime=docker"]
    assert "systemctl restart docker" in run.lines("systemctl")
    check = next(c for c in run.named("docker") if c.args[0] == "run")
    assert "--entrypoint" not in " ".join(check.args)  # the image's own entrypoint runs
    for arg in ("--gpus", "all", "--ipc=host", "memlock=-1", "--shm-size=16g", PULL):
        assert arg in check.args
    # trainvm-run: the job in the container, with the data mount and /etc/trainvm/env's variables
    runner = h.path("/usr/local/bin/trainvm-run").read_text()
    assert "docker run --rm --init" in runner and f"'{PULL}' \"$@\"" in runner
    assert "-v '/mnt/data/glue':'/mnt/data/glue'" in runner and "EnvironmentFile=/etc/trainvm/env" in runner
    assert S.shellcheck([h.path("/usr/local/bin/trainvm-run")]) == {}


def test_second_run_installs_nothing(make_harness):
    h = make_harness(script())
    assert h.run().status == "ready"
    h.reboot()
    run = h.run()
    assert run.rc == 0 and run.status == "ready"
    assert run.installs() == []
    assert not [c for c in run.named("docker") if c.args[0] == "pull"] and not run.named("nvidia-ctk")
    assert [c for c in run.named("docker") if c.args[0] == "run"]  # re-verified every boot


def test_forward_compatibility_mode_is_accepted(make_harness):
    run = make_harness(script(), STUB_CONTAINER_MODE="forward").run()
    assert run.rc == 0 and run.status == "ready", run.output[-2000:]


@pytest.mark.parametrize("mode,text", [
    ("unavailable", "compatibility mode is UNAVAILABLE"),
    ("803", "Error 803"),
    ("804", "Error 804"),
    ("nogpu", "sees no GPU inside the container"),
    ("nopython", "the check run exited 127"),
])
def test_check_run_failures_fail_the_container_phase(make_harness, mode, text):
    run = make_harness(script(), STUB_CONTAINER_MODE=mode).run()
    assert run.rc != 0 and re.fullmatch(r"failed:container:\d+", run.status), run.output[-2000:]
    assert text in run.report["error"]


def test_wrong_signing_key_stops_before_installing_docker(make_harness):
    run = make_harness(script(), STUB_KEY_WRONG="nvidia-ctk").run()
    assert run.rc != 0 and re.fullmatch(r"failed:container-engine:\d+", run.status)
    assert "not the expected one (fingerprint C95B321B61E88C1809C4F759DDCAE044F796ECB0" in run.report["error"]
    assert not any("docker-ce=" in c.line for c in run.named("apt-get"))


def test_a_transient_pull_failure_is_retried_then_fails(make_harness):
    run = make_harness(script(), STUB_DOCKER_PULL_FAIL="network").run()
    assert run.rc != 0 and re.fullmatch(r"failed:container:\d+", run.status)
    assert f"docker pull {PULL} failed: " in run.report["error"] and "TLS handshake timeout" in run.report["error"]
    assert len([c for c in run.named("docker") if c.args[0] == "pull"]) == 4  # the background pull, then 3 tries


def test_an_image_the_registry_does_not_have_fails_at_once_saying_not_found(make_harness):
    run = make_harness(script(), STUB_DOCKER_PULL_FAIL="1").run()
    assert run.rc != 0 and re.fullmatch(r"failed:container:\d+", run.status)
    assert f"docker pull {PULL} not found in nvcr.io: " in run.report["error"] and "manifest unknown" in run.report["error"]
    assert len([c for c in run.named("docker") if c.args[0] == "pull"]) == 2  # the background pull, then one more


def test_debian_uses_dockers_debian_repository(make_harness):
    h = make_harness(script("debian-12"), os_name="debian-12")
    run = h.run()
    assert run.rc == 0, run.output[-2000:]
    assert "https://download.docker.com/linux/debian bookworm stable" in h.path("/etc/apt/sources.list.d/docker.list").read_text()
    assert any("docker-ce=5:27.3.1-1~debian.12~bookworm" in c.line for c in run.named("apt-get"))


def test_verify_compares_digest_and_what_the_container_sees_with_the_image_facts(make_harness, tmp_path, monkeypatch):
    from provisioner.container.image import ImageFacts
    from provisioner.container.store import record
    from provisioner.verify.compare import compare

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = make_harness(script()).run()
    assert run.status == "ready"
    doc = S.from_dict(S.container_profile()).profile.model_dump(mode="json")
    verdict = compare(doc, run.report)
    assert verdict.status == "match", [f for f in verdict.fields if not f.ok]
    assert {f.field for f in verdict.fields} >= {"stack.container.digest", "stack.container.gpu"}

    def facts(**env: str) -> ImageFacts:
        return ImageFacts(image=IMAGE, digest=DIGEST, manifest_digest=DIGEST, config_digest=DIGEST, os="linux", architecture="amd64",
                          compressed_size=1, env={"CUDA_VERSION": "12.6.0.022", "CUDNN_VERSION": "9.3.0.75", "PYTORCH_VERSION": "2.5.0a0+872d972", **env})

    record(facts())
    verdict = compare(doc, run.report)
    assert verdict.status == "match" and {"stack.container.framework", "stack.container.cuda", "stack.container.cudnn"} <= {f.field for f in verdict.fields}
    record(facts(CUDA_VERSION="12.4.1", CUDNN_VERSION="9.1.0.70"))
    bad = {f.field for f in compare(doc, run.report).fields if not f.ok}
    assert bad == {"stack.container.cuda", "stack.container.cudnn"}
    other = dict(run.report, container={**run.report["container"], "digest": None})
    assert "stack.container.digest" in {f.field for f in compare(doc, other).fields if not f.ok}
