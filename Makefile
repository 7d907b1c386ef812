# Two entry points on a fresh clone (README "Quick start" says what each needs):
#   make run   - create .venv, install trainvm, plan an example profile against the embedded catalog (Python >= 3.11,
#                make, and PyPI for the locked packages)
#   make test  - install with dev extras, run the whole test suite (also npm, for the Azurite emulator)
# Both install exact, hash-checked versions: requirements.lock (trainvm's dependencies) and requirements-dev.lock
# (those plus the dev extras), made from pyproject.toml by `make lock-deps`, and requirements-build.lock (the build
# backend, hatchling, from requirements-build.in) (tests/unit/test_dev_lock.py fails when
# pyproject.toml asks for something a lock does not pin). `pip install trainvm` / `pip install -e .` still resolve
# from pyproject.toml's ranges.
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3.13 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
EXAMPLE ?= profiles/examples/bert-finetune-t4.yaml
PYTEST_ARGS ?=
AZURITE := tests/emulators/azurite/node_modules/.installed

.PHONY: run test lint fix test-os test-os-module test-vm test-vm-boot test-vm-boot-module test-vm-local test-vm-local-module test-live install install-dev lock-deps validate-examples bench catalog golden clean demo

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "trainvm needs Python >= 3.11; set PYTHON=/path/to/python3.11")'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml requirements.lock requirements-build.lock
	$(PIP) install --require-hashes -r requirements.lock -r requirements-build.lock
	@# the build backend (hatchling) comes from requirements-build.lock, not from an unpinned isolated build env
	$(PIP) install --no-deps --no-build-isolation -e .
	@# an editable install is not byte-compiled (a wheel install is); without .pyc files every
	@# command recompiles trainvm (~60 ms), more so where PYTHONDONTWRITEBYTECODE is set
	$(BIN)/python -m compileall -q provisioner
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.lock $(AZURITE)
	$(PIP) install --require-hashes -r requirements-dev.lock
	@touch $@

# Re-resolve both locks from pyproject.toml, on purpose (PyPI): pins that still satisfy pyproject.toml are kept;
# UPGRADE=1 takes the newest versions it allows. Then `make test` (tests/aws/test_moto_list_permission.py and the
# emulator tests catch a dev tool whose behaviour changed) and commit the locks with pyproject.toml.
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes -q \
	--custom-compile-command 'make lock-deps' $(if $(UPGRADE),--upgrade)
lock-deps: install
	$(UV_COMPILE) --extra dev -o requirements-dev.lock
	$(UV_COMPILE) -c requirements-dev.lock -o requirements.lock
	$(BIN)/uv pip compile requirements-build.in --universal --python-version 3.11 --generate-hashes -q \
		--custom-compile-command 'make lock-deps' $(if $(UPGRADE),--upgrade) -c requirements-dev.lock -o requirements-build.lock

# Azurite (the Azure Storage emulator, npm) for the Azure payload-store tests, pinned by its package-lock.json
$(AZURITE): tests/emulators/azurite/package.json tests/emulators/azurite/package-lock.json
	npm ci --prefix tests/emulators/azurite --no-audit --no-fund --loglevel=error
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: install
	@$(BIN)/python -m compileall -q provisioner
	$(BIN)/trainvm validate profiles/base/*.yaml profiles/examples/*.yaml
	@if $(BIN)/trainvm plan --help >/dev/null 2>&1; then $(BIN)/trainvm plan $(EXAMPLE); fi

test: lint
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

# ruff (pyflakes, bugbear, import order, pyupgrade; config in pyproject.toml) and mypy on provisioner/
lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/mypy

# apply ruff's safe fixes (import order, pyupgrade) before `make lint`
fix: install-dev
	$(BIN)/ruff check --fix .

# The rendered debian-12 script on a real Debian 12 userland (debootstrap, chroot, real apt/dpkg/
# dkms/curl/uv/PyPI, a signed fake NVIDIA repository over HTTPS): needs root, debootstrap and the
# Debian archive (it names what is missing); see tests/realos/lane.py. Scenarios gcp, aws-s3 and bake
# (tests/realos/bakelane.py: a bake, its image, a baked boot; TRAINVM_OS_SCENARIOS picks). 7-18 min on 2 cores; the
# rootfs is cached under /var/cache/trainvm-os (figures: bench/RESULTS.md). Not in make test or CI.
test-os: install-dev
	$(BIN)/python tests/realos/lane.py

# Issue 38's real kernel module, in the chroot lane of test-os (tests/realos/modulelane.py): a V100 profile (proprietary
# modules) at driver 550.163.01 whose nvidia-kernel-dkms in the fake repository is Debian's real one (trixie non-free,
# downloaded once by apt into /var/cache/trainvm-os/nvidia-module and checked against a pinned sha256:
# tests/realos/nvidia_module.py); DKMS really compiles NVIDIA's module against the root filesystem's cloud kernel
# headers. Asserts dkms status and each module's vermagic for that kernel. Root, what test-os needs, deb.debian.org
# once. ~3.5 min on 2 cores (the DKMS build ~2.5 min of it; figures: bench/RESULTS.md). Not in make test or CI.
test-os-module: install-dev
	nice -n 10 $(BIN)/python tests/realos/modulelane.py

# Issue 38's VM lane, its first part: a Debian 12 image built from Debian's packages (debootstrap, the cloud kernel,
# systemd, cloud-init; tests/vm/image.py says what it is and is not) and one boot of it under QEMU (TCG: KVM guests
# hang on these machines), whose NoCloud user data prints the booted kernel and powers off. Needs root, debootstrap,
# qemu-system-x86, qemu-utils, extlinux, syslinux-common, genisoimage, fdisk. ~15 min the first time (debootstrap),
# then ~3-4 min (the boot); first the local provider's lifecycle on a real QEMU without an OS (tests/vm/test_local_qemu.py,
# marker vm: seconds). Not in make test or CI.
test-vm: install-dev
	nice -n 10 $(BIN)/python -m pytest -m vm tests/vm
	$(BIN)/python tests/vm/image.py smoke

# The same image booted with trainvm's real GCE bootstrap for the debian-12 T4 profile as NoCloud user data, against
# the chroot lane's payload store, metadata stub and fake NVIDIA repository (tests/vm/bootlane.py says what it models):
# the payload verified, every phase up to the GPU gate on a booted cloud kernel with systemd as PID 1, and the GPU
# gate failing (the replica driver is empty). Root; ports 80 and 443 of 127.0.0.1 free; one VM at a time (TCG eats
# both cores). Figures: bench/RESULTS.md. Not in make test or CI.
test-vm-boot: install-dev
	nice -n 10 $(BIN)/python tests/vm/bootlane.py

# The local cloud through trainvm's own command line on a booted Debian 12 kernel (tests/vm/locallane.py says what it
# models): plan/up --cloud local --wait-ready (a T4 rehearsal, failing at the GPU gate on the empty driver replica),
# status, verify, logs, ssh, the idle power-off of the failed VM, start (nothing fetched again), stop, a tampered
# payload refused, down (nothing left). Root; port 443 of this machine's address free; ~30 min under TCG. Figures:
# bench/RESULTS.md. Not in make test or CI.
test-vm-local: install-dev
	nice -n 10 $(BIN)/python tests/vm/locallane.py

# The same with the replica's real nvidia-kernel-dkms (Debian's R550 source) and a V100 profile at 550.163.01: DKMS
# compiles NVIDIA's module on the booted kernel under TCG, up ends `rehearsed`, verify exits 6, after start every phase
# is verified (nothing installed). Not in make test or CI; its time: bench/RESULTS.md.
test-vm-local-module: install-dev
	TRAINVM_VM_MODULE=1 nice -n 10 $(BIN)/python tests/vm/locallane.py

# test-vm-boot with the real kernel module (TRAINVM_VM_MODULE=1): test-os-module's V100 profile at 550.163.01 and its
# real nvidia-kernel-dkms, so DKMS compiles NVIDIA's module on the BOOTED cloud kernel under TCG; also asserts dkms
# status and `modinfo -F vermagic nvidia-current` against the booted kernel. Its TCG time is not measured (the DKMS
# build is 154 s natively on 2 cores; test-vm-boot, with no build, reached the GPU gate after ~33 min): raise
# TRAINVM_VM_TIMEOUT (3600 s) for a whole run; TRAINVM_VM_STOP_AT=driver stops at the driver phase's start. Not in
# make test or CI.
test-vm-boot-module: install-dev
	TRAINVM_VM_MODULE=1 nice -n 10 $(BIN)/python tests/vm/bootlane.py

# The end-to-end scenario of tests/live/scenario.py on a REAL cloud account (costs money, bounded by LIVE_MAX_USD,
# default 2 USD, checked before anything is created; `down` runs on every exit): docs/development.md "Live lane". Skips, saying
# why, without CLOUD or that cloud's credentials. Never in make test or CI (pytest marker `live`, deselected).
CLOUD ?=
PROFILE ?=
test-live: install-dev
	LIVE_CLOUD=$(CLOUD) LIVE_PROFILE=$(PROFILE) $(BIN)/python -m pytest tests/live/test_live.py -m live -p no:randomly -rs -s $(PYTEST_ARGS)

# every emulator the README's journeys need, in one process (docs/demo.md): GCE + GCS, ARM + Azurite, moto's server,
# the price APIs. Prints the environment and writes it to .venv/demo.env (`source` it in another shell); Ctrl-C stops
# them all. tests/e2e/test_demo_journeys.py walks the journeys against it.
demo: install-dev
	@$(BIN)/python -m tests.emulators.serve --env-file $(VENV)/demo.env

validate-examples: install
	$(BIN)/trainvm validate profiles/base/*.yaml profiles/examples/*.yaml

bench: install-dev
	@$(BIN)/python -m compileall -q provisioner
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# rebuild provisioner/catalog/data/ from the offer snapshot committed in scripts/catalog-snapshot/ (nothing outside
# the repository); `$(BIN)/python scripts/build_catalog.py --check` says whether the committed catalog is current
catalog: install
	$(BIN)/python scripts/build_catalog.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .hypothesis .mypy_cache .ruff_cache
