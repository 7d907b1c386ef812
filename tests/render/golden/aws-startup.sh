#!/bin/bash
set -Eeuo pipefail
umask 022
export LC_ALL=C
export PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TV_PROFILE='bert-finetune'
TV_HASH='8e6b75dc3316d4dc813d4abe1c94392c0a81828f91b31bc24f06bc7e3a02ae33'
TV_CLOUD='aws'
TV_INSTANCE_TYPE='g4dn.2xlarge'
TV_REGION='us-east-1'
TV_ZONE='us-east-1a'
TV_OS='ubuntu-22.04'
TV_NVIDIA_REPO='ubuntu2204'
TV_KEYRING_SHA256='d93190d50b98ad4699ff40f4f7af50f16a76dac3bb8da1eaaf366d47898ff8df'
TV_DRIVER='550.127.05'
TV_DRIVER_PKG='nvidia-open'
TV_MODULES='open'
TV_NVSWITCH=0
TV_FM_PKG=''
TV_KERNEL_HEADERS_META=( 'linux-headers-aws' )
TV_KERNEL_HOLD=( 'linux-aws' 'linux-image-aws' 'linux-headers-aws' )
TV_UV_VERSION='0.13.9'
TV_UV_URL='https://files.pythonhosted.org/packages/3d/aa/26d64642d808de4a652579ef950d7cd2d37f080a8babf9c67c6b75fc4c3f/uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl'
TV_UV_SHA256='d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19'
TV_PYTHON='3.11.9'
TV_PYPI_INDEX='https://pypi.org/simple'
TV_TORCH_INDEX='https://download.pytorch.org/whl/cu124'
TV_STACK_PYPROJECT='[project]
name = "trainvm-stack"
version = "0"
dependencies = [
  "torch==2.4.1+cu124",
  "transformers==4.44.2",
  "datasets==2.21.0",
  "accelerate==0.34.2",
]

[tool.uv.sources]
torch = { index = "pytorch" }

[[tool.uv.index]]
name = "pytorch"
url = "https://download.pytorch.org/whl/cu124"
explicit = true
'
TV_PACKAGES=( 'torch==2.4.1+cu124' 'transformers==4.44.2' 'datasets==2.21.0' 'accelerate==0.34.2' )
TV_LOCK_SHA256=''
TV_PACKAGES_FINGERPRINT='25a8e60b1df770e1d99d4c967f3bc7112c10aa3e3fa18709068d8f8571cf0966'
TV_DATA_SRC=( 'gs://example-ml-data/glue/' )
TV_DATA_DEST=( '/mnt/data/glue' )
TV_DATA_STAGE=( '/mnt/data/glue' )
TV_DATA_NAME=( '' )
TV_DATA_UNREADABLE='gs://example-ml-data/glue/ is read natively only on gcp; a VM on aws needs data[].credential (a secret:// reference) or an https:// URL'
TV_NVME='optional'
TV_SCRATCH='/mnt/data'
TV_IDLE_MINUTES=60
TV_ON_IDLE='stop'
TV_ON_MAX_RUN='stop'
TV_MAX_RUN_SECONDS=86400
TV_SHUTDOWN_DOES='stop'
TV_MAX_REBOOTS=2
TV_EXPECTED='{"cloud":"aws","data":[{"dest":"/mnt/data/glue","stage":"/mnt/data/glue"}],"disk_path":"/mnt/data","driver":"550.127.05","env":{"CUBLAS_WORKSPACE_CONFIG":":4096:8","PYTHONHASHSEED":"0"},"hardware":{"gpu":["T4"],"gpu_count":1,"local_nvme":false,"min_gpu_memory_gib":null,"min_memory_gib":30.0,"min_vcpus":8},"hash":"8e6b75dc3316d4dc813d4abe1c94392c0a81828f91b31bc24f06bc7e3a02ae33","nvme":"optional","profile":"bert-finetune","schema":"trainvm.expect/1","sources":[],"stack":{"container":null,"cuda":"12.4","cuda_toolkit":false,"cudnn":"9.1.0","driver":"550.127.05","framework":{"gpu":true,"name":"torch","version":"2.4.1+cu124"},"lock":[],"os":"ubuntu-22.04","packages":[["torch","2.4.1+cu124"],["transformers","4.44.2"],["datasets","2.21.0"],["accelerate","0.34.2"]],"python":"3.11.9"},"tolerance":0.92}'
TV_LOCK=''
TV_PERF_BUDGET=0

TV_ROOT="${TRAINVM_ROOT:-}"
TV_STATE="$TV_ROOT/var/lib/trainvm"
TV_LOGDIR="$TV_ROOT/var/log/trainvm"
TV_ETC="$TV_ROOT/etc/trainvm"
TV_OPT="$TV_ROOT/opt/trainvm"
TV_VENV="$TV_OPT/venv"
TV_UV="$TV_OPT/bin/uv"
TV_HELPER="$TV_STATE/lib/trainvm_helper.py"
TV_RETRY_SLEEP="${TRAINVM_RETRY_SLEEP:-10}"
TV_PHASE=start
TV_PHASE_RESULT=verified
TV_PHASE_T0=$EPOCHREALTIME
TV_CHANGED=0
TV_ERROR=""
TV_MAIN_PID=$$
TV_APT_OPTS=(-y -q -o DPkg::Lock::Timeout=600 -o Acquire::Retries=5
-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
export TRAINVM_ROOT="$TV_ROOT" UV_NO_CONFIG=1 UV_MANAGED_PYTHON=1
export UV_PYTHON_INSTALL_DIR="$TV_OPT/python" UV_CACHE_DIR="$TV_ROOT/var/cache/trainvm/uv"
tv_log() { printf '%(%Y-%m-%dT%H:%M:%S%z)T trainvm %s: %s\n' -1 "$TV_PHASE" "$*"; }
tv_status() {
printf 'TRAINVM_STATUS=%s\n' "$1"
printf '{"status": "%s", "phase": "%s", "time": %s}\n' "$1" "$TV_PHASE" "$EPOCHSECONDS" >"$TV_STATE/status.json.tmp"
mv -f "$TV_STATE/status.json.tmp" "$TV_STATE/status.json"
}
tv_fail() {
local reason=$1 line=$2
shift 2
if [ "$BASHPID" != "$TV_MAIN_PID" ]; then exit 1; fi
trap - ERR
set +e
TV_ERROR="$*"
tv_log "ERROR: $*"
tv_record_phase failed
tv_finish "failed:$reason:$line"
exit 1
}
tv_start() {
trap 'tv_fail "$TV_PHASE" "$LINENO" "command failed (exit $?): $BASH_COMMAND"' ERR
mkdir -p "$TV_STATE/lib" "$TV_STATE/phases" "$TV_LOGDIR" "$TV_ETC"
tv_write_helper
printf '%s\n' "$TV_EXPECTED" >"$TV_STATE/expected.json"
exec > >(python3 "$TV_HELPER" redact | tee -a "$TV_LOGDIR/provision.log") 2>&1
exec 9>>"$TV_STATE/lock"
flock -w 3600 9
tv_log "profile $TV_PROFILE ($TV_HASH) on $TV_CLOUD $TV_INSTANCE_TYPE in $TV_REGION $TV_ZONE, $TV_OS"
}
tv_phase() {
TV_PHASE=$1
TV_PHASE_RESULT=verified
TV_PHASE_T0=$EPOCHREALTIME
tv_log "phase start"
tv_status "running:$1"
"$2"
tv_record_phase "$TV_PHASE_RESULT"
tv_log "phase end: $TV_PHASE_RESULT"
}
tv_record_phase() {
local us=$(( ${EPOCHREALTIME/./} - ${TV_PHASE_T0/./} ))
printf '%s %d.%03d\n' "$1" $((us / 1000000)) $((us % 1000000 / 1000)) >"$TV_STATE/phases/$TV_PHASE"
}
tv_installing() {
if [ "$TV_PHASE_RESULT" != 'done' ]; then
TV_PHASE_RESULT='done'
tv_publish status "running:$TV_PHASE"
fi
}
tv_done() { [ -f "$TV_STATE/done.$1" ]; }
tv_mark() { printf '%s\n' "$TV_HASH" >"$TV_STATE/done.$1"; }
tv_caller_line() {
local i
for ((i = 1; i < ${#FUNCNAME[@]}; i++)); do
case ${FUNCNAME[$i]} in
tv_retry | tv_apt) ;;
*) printf '%s\n' "${BASH_LINENO[$((i - 1))]}"; return 0 ;;
esac
done
printf '0\n'
}
tv_retry() {
local i
for i in 1 2 3; do
if "$@"; then return 0; fi
tv_log "attempt $i of 3 failed: $*"
if [ "$i" -lt 3 ]; then sleep "$TV_RETRY_SLEEP"; fi
done
tv_fail "$TV_PHASE" "$(tv_caller_line)" "failed 3 times: $*"
}
tv_apt() { tv_retry env DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get "${TV_APT_OPTS[@]}" "$@"; }
tv_pkgver() {
apt-cache madison "$1" 2>/dev/null | awk -F'|' -v want="$2" -v has="${3:-}" '
{ v = $2; gsub(/[[:space:]]/, "", v) }
index(v, want) == 1 && (has == "" || index(v, has) > 0) { print v; exit }' || true
}
tv_hold_installed() {
local p held=()
for p in "$@"; do
if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then held+=("$p"); fi
done
if [ "${#held[@]}" -gt 0 ]; then
apt-mark -o DPkg::Lock::Timeout=600 hold "${held[@]}" >/dev/null
tv_log "held: ${held[*]}"
fi
}
tv_reboot() {
local n=0
if [ -s "$TV_STATE/reboots" ]; then n=$(<"$TV_STATE/reboots"); fi
if [ "$n" -ge "$TV_MAX_REBOOTS" ]; then
tv_fail "$TV_PHASE" "$1" "$2, but the reboot limit ($TV_MAX_REBOOTS) is reached"
fi
printf '%s\n' "$((n + 1))" >"$TV_STATE/reboots"
tv_log "rebooting ($((n + 1)) of at most $TV_MAX_REBOOTS): $2"
tv_record_phase reboot
tv_finish "running:$TV_PHASE"
sync
reboot
exit 0
}
tv_write_file() {
local tmp="$1.trainvm-tmp"
mkdir -p "${1%/*}"
cat >"$tmp"
chmod "$2" "$tmp"
if [ -f "$1" ] && cmp -s "$tmp" "$1"; then
rm -f "$tmp"
else
mv -f "$tmp" "$1"
TV_CHANGED=1
fi
}
tv_os_release() {
local key value id="" ver=""
while IFS='=' read -r key value; do
value=${value#\"}
value=${value%\"}
case $key in
ID) id=$value ;;
VERSION_ID) ver=$value ;;
esac
done <"$TV_ROOT/etc/os-release"
printf '%s %s\n' "$id" "$ver"
}
tv_agent() {
(cd / && PYTHONPATH="$TV_OPT/current/agent" "${PY:-python3}" -s -m provisioner.agent "$@")
}
tv_write_helper() {
cat >"$TV_HELPER.tmp" <<'TRAINVM_HELPER_PY'
#!/usr/bin/env python3
import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
ROOT = os.environ.get('TRAINVM_ROOT', '')
STATE = ROOT + '/var/lib/trainvm'
def load(name):
 try:
  with open(os.path.join(STATE, name), encoding='utf-8') as fh:
   return json.load(fh)
 except (OSError, ValueError):
  return None
def run(argv, timeout=300, stderr=subprocess.STDOUT):
 try:
  p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=stderr, timeout=timeout, universal_newlines=True)
 except (OSError, subprocess.SubprocessError) as exc:
  return (127, str(exc))
 return (p.returncode, p.stdout)
def read(path):
 try:
  with open(ROOT + path, encoding='utf-8', errors='replace') as fh:
   return fh.read()
 except OSError:
  return ''
def env_quote(value):
 return '"' + re.sub('([\\\\"`$])', '\\\\\\1', value) + '"'
def resolve_secret(ref, lines=False):
 kind, _, rest = ref[len('secret://'):].partition('/')
 fetch = globals().get('secret_' + kind.replace('-', '_'))
 value = fetch(rest) if fetch else None
 if value is None:
  raise RuntimeError('secret %s could not be read' % ref)
 if any((ord(c) < 32 and c not in ('\t\r\n' if lines else '\t') for c in value)):
  raise RuntimeError('secret %s contains newlines or control characters' % ref)
 return value
REDACT = re.compile('(?i)(\\w://)[^\\s/@\'\\"]+@|([?&][\\w.-]+=|\\b(?:sig|token|signature|password|sas)=)[^\\s&\'\\"#]+|(\\bbearer\\s+)[\\w.~+/=-]+')
def hidden_values():
 out = [re.sub('\\\\(.)', '\\1', v) for v in re.findall('^\\w+="(.{4,})"$', read('/etc/trainvm/secrets.env'), re.M)]
 more = globals().get('cred_hidden')
 return out + (more() if more else [])
def redact(text):
 for value in sorted(set(hidden_values()), key=len, reverse=True):
  text = text.replace(value, '***')
 return REDACT.sub(lambda m: m.group(1) + '***@' if m.group(1) else (m.group(2) or m.group(3)) + '***', text)
def cmd_redact(exp):
 for line in iter(sys.stdin.buffer.readline, b''):
  text = line.decode('utf-8', 'replace')
  try:
   text = text if text.startswith('TRAINVM_REPORT=') else redact(text)
  except Exception:
   text = 'trainvm: (line withheld: redaction failed)\n'
  sys.stdout.write(text)
  sys.stdout.flush()
 return 0
def write_env(name, lines, mode):
 path = ROOT + '/etc/trainvm/' + name
 if not lines:
  if os.path.exists(path):
   os.remove(path)
   return True
  return False
 text = '\n'.join(lines) + '\n'
 if read('/etc/trainvm/' + name) == text and os.stat(path).st_mode & 511 == mode:
  return False
 with os.fdopen(os.open(path + '.tmp', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), 'w', encoding='utf-8') as fh:
  fh.write(text)
 os.chmod(path + '.tmp', mode)
 os.replace(path + '.tmp', path)
 return True
def cmd_env(exp):
 public, secret = (["# trainvm: the profile's stack.env (systemd EnvironmentFile= and sh)"], [])
 for key, value in sorted(exp['env'].items()):
  if value.startswith('secret://'):
   try:
    secret.append('%s=%s' % (key, env_quote(resolve_secret(value))))
   except Exception as exc:
    print('env %s: %s' % (key, exc), file=sys.stderr)
    return 1
  else:
   public.append('%s=%s' % (key, env_quote(value)))
 changed = write_env('env', public, 420)
 changed = write_env('secrets.env', ['# trainvm: secret:// values of stack.env'] + secret if secret else [], 384) or changed
 print('changed' if changed else 'unchanged')
 return 0
def apt_indexes():
 for path in run(['apt-get', 'indextargets', '--format', '$(FILENAME)', 'Created-By: Packages'], stderr=subprocess.DEVNULL)[1].split():
  if path.endswith('Packages'):
   with open(path, encoding='utf-8', errors='replace') as fh:
    yield fh.read()
  else:
   yield run(['/usr/lib/apt/apt-helper', 'cat-file', path], stderr=subprocess.DEVNULL)[1]
def dep_names(value):
 return [re.split('[\\s(:]', a.strip())[0] for a in re.split('[,|]', value) if a.strip()]
def cmd_driver_pin(exp, roots):
 want, pkgs, provides, closure = (exp['driver'] + '-', {}, {}, {})
 for text in apt_indexes():
  for block in text.split('\n\n'):
   st = dict(re.findall('^([\\w-]+):[ \\t]*(.*)$', block, re.M))
   if re.sub('^\\d+:', '', st.get('Version', '')).startswith(want) and 'Package' in st:
    pkgs.setdefault(st['Package'], st)
    for p in dep_names(st.get('Provides', '')):
     provides.setdefault(p, []).append(st['Package'])
 queue = list(roots)
 while queue:
  name = queue.pop()
  for p in [name] + provides.get(name, []):
   if p in pkgs and p not in closure:
    closure[p] = pkgs[p].get('Source', p).split()[0]
    queue += dep_names(','.join((pkgs[p].get(f, '') for f in ('Pre-Depends', 'Depends', 'Recommends'))))
 if roots[0] not in closure:
  return 1
 with open(STATE + '/driver-packages', 'w') as fh:
  fh.write('\n'.join(sorted(closure)) + '\n')
 print('Package: %s\nPin: version %s*\nPin-Priority: 1000' % (' '.join(('src:' + s for s in sorted(set(closure.values())))), want))
 return 0
def main(argv):
 exp, cmd = (load('expected.json'), argv[1] if len(argv) > 1 else '')
 commands = {'env': cmd_env, 'redact': cmd_redact}
 if cmd == 'ec2' and len(argv) == 3 and ('api_aws' in globals()):
  return globals()['api_aws'](argv[2])
 if exp is None:
  print('trainvm helper: %s/expected.json is missing' % STATE, file=sys.stderr)
  return 2
 if cmd == 'credential' and len(argv) == 4 and ('cred_file' in globals()):
  return globals()['cred_file'](argv[2], argv[3])
 if cmd == 'driver-pin' and len(argv) > 2:
  return cmd_driver_pin(exp, argv[2:])
 if cmd in commands:
  return commands[cmd](exp)
 print('usage: trainvm_helper.py env|redact|credential REF FILE|driver-pin PKG...|ec2 stop|terminate', file=sys.stderr)
 return 2
if __name__ == '__main__':
 sys.exit(main(sys.argv))
TRAINVM_HELPER_PY
mv -f "$TV_HELPER.tmp" "$TV_HELPER"
}
tv_os_prepare_repo() {
tv_log "ubuntu: no archive components to enable"
}
tv_publish() {
tv_log "status $1: $2"
}
tv_install_resume() {
TV_CHANGED=0
tv_write_file "$TV_ROOT/etc/systemd/system/trainvm-provision.service" 0644 <<'TRAINVM_UNIT'
[Unit]
Description=trainvm provisioning (resumes after reboots, re-verifies on every boot)
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/trainvm-provision
TimeoutStartSec=infinity
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
TRAINVM_UNIT
if [ "$TV_CHANGED" = 1 ]; then
systemctl daemon-reload
systemctl enable trainvm-provision.service
fi
}
tv_nvme_by_model() {
local c model ns
for c in "$TV_ROOT"/sys/class/nvme/nvme*; do
if [ ! -r "$c/model" ]; then continue; fi
model=$(<"$c/model")
case $model in
"$1"*) ;;
*) continue ;;
esac
for ns in "$c"/nvme*n*; do
if [ -e "$ns" ]; then printf '%s\n' "$TV_ROOT/dev/${ns##*/}"; fi
done
done
}
tv_nvme_candidates() {
local d found=0
for d in "$TV_ROOT"/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*; do
case $d in *-part*) continue ;; esac
if [ -e "$d" ]; then printf '%s\n' "$d"; found=1; fi
done
if [ "$found" = 0 ]; then tv_nvme_by_model 'Amazon EC2 NVMe Instance Storage'; fi
}
tv_install_uv() {
local whl="$TV_STATE/uv-$TV_UV_VERSION.whl" have=""
if [ -x "$TV_UV" ]; then have=$("$TV_UV" --version 2>/dev/null || true); fi
case $have in "uv $TV_UV_VERSION"*) return 0 ;; esac
tv_retry curl -fsSL --retry 5 --retry-delay 5 -o "$whl" "$TV_UV_URL"
if ! printf '%s  %s\n' "$TV_UV_SHA256" "$whl" | sha256sum -c - >/dev/null; then
tv_fail "$TV_PHASE" "$LINENO" "the uv $TV_UV_VERSION wheel does not have the expected sha256 $TV_UV_SHA256"
fi
mkdir -p "${TV_UV%/*}"
python3 - "$whl" "$TV_UV" <<'TRAINVM_PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as whl:
 name = next((n for n in whl.namelist() if n.endswith('.data/scripts/uv')))
 with whl.open(name) as src, open(sys.argv[2] + '.tmp', 'wb') as dst:
  dst.write(src.read())
os.chmod(sys.argv[2] + '.tmp', 493)
os.replace(sys.argv[2] + '.tmp', sys.argv[2])
TRAINVM_PY
have=$("$TV_UV" --version)
case $have in
"uv $TV_UV_VERSION"*) tv_log "installed $have" ;;
*) tv_fail "$TV_PHASE" "$LINENO" "expected uv $TV_UV_VERSION, got: $have" ;;
esac
}
tv_install_self() {
local self="${BASH_SOURCE[0]:-}" dest="$TV_ROOT/usr/local/sbin/trainvm-provision"
if [ -z "$self" ] || [ ! -f "$self" ]; then
tv_log "cannot locate this script; no copy installed"
return 0
fi
if [ -f "$dest" ] && cmp -s "$self" "$dest"; then return 0; fi
mkdir -p "${dest%/*}"
cp "$self" "$dest.tmp"
chmod 0755 "$dest.tmp"
mv -f "$dest.tmp" "$dest"
}
tv_os_check() {
local id ver
read -r id ver < <(tv_os_release)
if [ "${id}${ver//./}" != "$TV_NVIDIA_REPO" ]; then
tv_fail preflight "$LINENO" "the image is ${id:-unknown} ${ver:-unknown}, but this script was rendered for $TV_OS"
fi
}
phase_preflight() {
local previous=""
tv_fail data "$LINENO" "$TV_DATA_UNREADABLE"
tv_install_self
tv_install_resume
if [ -s "$TV_STATE/profile-hash" ]; then previous=$(<"$TV_STATE/profile-hash"); fi
if [ -n "$previous" ] && [ "$previous" != "$TV_HASH" ]; then
tv_fail preflight "$LINENO" "this VM was provisioned from profile hash $previous, not $TV_HASH; recreate it (trainvm down, trainvm up) instead of changing it in place"
fi
printf '%s\n' "$TV_HASH" >"$TV_STATE/profile-hash"
tv_os_check
if tv_done preflight; then return 0; fi
tv_installing
tv_write_file "$TV_ROOT/etc/apt/apt.conf.d/99trainvm" 0644 <<'TRAINVM_APT'
// trainvm: wait for the dpkg lock, retry downloads, no automatic upgrades of pinned packages.
DPkg::Lock::Timeout "600";
Acquire::Retries "5";
APT::Periodic::Update-Package-Lists "0";
APT::Periodic::Unattended-Upgrade "0";
Unattended-Upgrade::Package-Blacklist { "nvidia-"; "libnvidia-"; "cuda-"; "libcudnn"; "linux-"; };
TRAINVM_APT
systemctl disable --now unattended-upgrades.service apt-daily.timer apt-daily-upgrade.timer >/dev/null 2>&1 ||
tv_log "unattended-upgrades timers were not active"
systemctl mask unattended-upgrades.service apt-daily-upgrade.service >/dev/null 2>&1 ||
tv_log "could not mask unattended-upgrades (not installed?)"
tv_mark preflight
}
tv_secure_boot_check() {
local state="" efivar="$TV_ROOT/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
if command -v mokutil >/dev/null 2>&1; then
state=$(mokutil --sb-state 2>&1 || true)
elif [ -r "$efivar" ] && [ "$(od -An -t u1 -j4 -N1 "$efivar" | tr -d ' ')" = 1 ]; then
state="SecureBoot enabled"
fi
case $state in
*"SecureBoot enabled"*)
tv_fail secure-boot "$LINENO" "Secure Boot is enabled: the exact driver $TV_DRIVER is built by DKMS and the firmware would reject its modules. Recreate the VM without Secure Boot (GCE: shieldedInstanceConfig.enableSecureBoot=false; Azure: securityType Standard, or Trusted Launch with secureBootEnabled=false)"
;;
esac
tv_log "secure boot: ${state:-no EFI Secure Boot}"
}
tv_nvidia_repo() {
local id ver token arch deb="$TV_STATE/cuda-keyring_1.1-1_all.deb"
if tv_done repo; then return 0; fi
read -r id ver < <(tv_os_release)
token="${id}${ver//./}"
case $(uname -m) in
x86_64) arch=x86_64 ;;
*) tv_fail driver "$LINENO" "architecture $(uname -m) is not supported (cuda-keyring checksums are for x86_64)" ;;
esac
tv_os_prepare_repo
tv_retry curl -fsSL --retry 5 --retry-delay 5 -o "$deb" \
"https://developer.download.nvidia.com/compute/cuda/repos/$token/$arch/cuda-keyring_1.1-1_all.deb"
if ! printf '%s  %s\n' "$TV_KEYRING_SHA256" "$deb" | sha256sum -c - >/dev/null; then
tv_fail driver "$LINENO" "cuda-keyring_1.1-1_all.deb for $token does not have the expected sha256 $TV_KEYRING_SHA256"
fi
tv_apt install "$deb"
tv_apt update
tv_driver_pin
tv_mark repo
}
tv_driver_pin() {
local pin roots=("$TV_DRIVER_PKG" "nvidia-driver-pinning-$TV_DRIVER")
if [ -n "$TV_FM_PKG" ]; then roots+=("$TV_FM_PKG"); fi
if ! pin=$(python3 "$TV_HELPER" driver-pin "${roots[@]}"); then
tv_fail driver "$LINENO" "$TV_DRIVER_PKG $TV_DRIVER is not in NVIDIA's repository"
fi
tv_write_file "$TV_ROOT/etc/apt/preferences.d/trainvm-nvidia-driver" 0644 <<<"$pin"
}
tv_kernel_prepare() {
local kver
kver=$(uname -r)
if [ -f "$TV_ROOT/var/run/reboot-required.pkgs" ] && grep -q '^linux-image' "$TV_ROOT/var/run/reboot-required.pkgs"; then
tv_reboot "$LINENO" "a newer kernel is installed but not running"
fi
if tv_done kernel; then return 0; fi
if [ -z "$(tv_pkgver "linux-headers-$kver" "")" ]; then
if [ -f "$TV_STATE/kernel-moved" ]; then
tv_fail driver "$LINENO" "linux-headers-$kver (running kernel) is not in the archive, even after installing ${TV_KERNEL_HOLD[*]}"
fi
tv_apt install "${TV_KERNEL_HOLD[@]}"
printf '%s\n' "$kver" >"$TV_STATE/kernel-moved"
tv_reboot "$LINENO" "linux-headers-$kver is not in the archive; booting ${TV_KERNEL_HOLD[0]}"
fi
tv_apt install "linux-headers-$kver" "${TV_KERNEL_HEADERS_META[@]}" dkms
tv_hold_installed "linux-image-$kver" "linux-headers-$kver" "linux-modules-$kver" "${TV_KERNEL_HOLD[@]}"
tv_mark kernel
}
tv_driver_install() {
local pin="nvidia-driver-pinning-$TV_DRIVER" pinver pkgver held=()
if tv_done driver-pkg; then return 0; fi
pinver=$(tv_pkgver "$pin" "")
if [ -n "$pinver" ]; then tv_apt install "$pin=$pinver"; fi
pkgver=$(tv_pkgver "$TV_DRIVER_PKG" "$TV_DRIVER-")
if [ -z "$pkgver" ]; then
tv_fail driver "$LINENO" "$TV_DRIVER_PKG $TV_DRIVER is not in NVIDIA's $TV_NVIDIA_REPO repository (apt-cache madison); no other version is installed"
fi
tv_log "installing $TV_DRIVER_PKG=$pkgver ($TV_MODULES kernel modules)"
tv_apt install "$TV_DRIVER_PKG=$pkgver"
mapfile -t held <"$TV_STATE/driver-packages"
tv_hold_installed "$TV_DRIVER_PKG" "$pin" "${held[@]}"
tv_mark driver-pkg
}
tv_gpu_gate() {
local out rc=0
if ! out=$(modprobe nvidia 2>&1); then
tv_log "modprobe nvidia: $out"
case $out in
*"Key was rejected"* | *"Required key not available"*)
tv_fail secure-boot "$1" "the kernel rejected the unsigned NVIDIA module (Secure Boot); recreate the VM without Secure Boot"
;;
esac
fi
out=$(tv_agent gpu-check) || rc=$?
printf '%s\n' "$out"
case $rc in
0) ;;
3) tv_reboot "$1" "the NVIDIA kernel module is not loaded or is not the installed driver ($out)" ;;
*) tv_fail driver "$1" "driver/GPU check on $TV_INSTANCE_TYPE (expected driver $TV_DRIVER): ${out//$'\n'/; }" ;;
esac
}
phase_driver() {
if tv_done driver; then
tv_gpu_gate "$LINENO"
return 0
fi
tv_installing
tv_secure_boot_check
tv_nvidia_repo
tv_kernel_prepare
tv_driver_install
if [ "$TV_NVSWITCH" = 1 ]; then tv_fabricmanager; fi
systemctl enable nvidia-persistenced.service || tv_log "nvidia-persistenced could not be enabled"
tv_gpu_gate "$LINENO"
systemctl start nvidia-persistenced.service || tv_log "nvidia-persistenced did not start"
tv_mark driver
}
phase_cuda() {
TV_PHASE_RESULT=skipped
}
phase_python() {
if ! tv_done python || [ ! -x "$TV_VENV/bin/python" ]; then
tv_installing
tv_install_uv
tv_retry "$TV_UV" python install --no-bin "$TV_PYTHON"
"$TV_UV" venv --python "$TV_PYTHON" "$TV_VENV"
tv_mark python
fi
if ! "$TV_VENV/bin/python" -c 'import sys; v = sys.version.split()[0]; sys.exit(0 if v == sys.argv[1] else "python " + v + " is not " + sys.argv[1])' "$TV_PYTHON"; then
tv_fail python "$LINENO" "the venv does not run Python $TV_PYTHON"
fi
}
phase_packages() {
local lock="$TV_STATE/requirements.lock" args=() out rc=0
if ! tv_done packages || [ "$(<"$TV_STATE/done.packages")" != "$TV_PACKAGES_FINGERPRINT" ]; then
tv_installing
args=(pip install --python "$TV_VENV/bin/python" --only-binary :all: --index-url "$TV_PYPI_INDEX")
if [ -n "$TV_LOCK_SHA256" ]; then
printf '%s' "$TV_LOCK" >"$lock"
if ! printf '%s  %s\n' "$TV_LOCK_SHA256" "$lock" | sha256sum -c - >/dev/null; then
tv_fail packages "$LINENO" "the embedded lock file does not match its sha256 $TV_LOCK_SHA256"
fi
if [ -n "$TV_TORCH_INDEX" ]; then
args+=(--extra-index-url "$TV_TORCH_INDEX" --index-strategy unsafe-best-match)
fi
args+=(--require-hashes -r "$lock")
elif [ -n "$TV_STACK_PYPROJECT" ]; then
mkdir -p "$TV_STATE/stack"
printf '%s' "$TV_STACK_PYPROJECT" >"$TV_STATE/stack/pyproject.toml"
args+=(-r "$TV_STATE/stack/pyproject.toml")
else
args+=("${TV_PACKAGES[@]}")
fi
tv_retry "$TV_UV" "${args[@]}"
printf '%s\n' "$TV_PACKAGES_FINGERPRINT" >"$TV_STATE/done.packages"
fi
out=$(tv_agent stack-check --python "$TV_VENV/bin/python") || rc=$?
printf '%s\n' "$out"
if [ "$rc" != 0 ]; then tv_fail packages "$LINENO" "the installed stack does not match the profile: ${out//$'\n'/; }"; fi
}
phase_env() {
local hook result
result=$(python3 "$TV_HELPER" env) || tv_fail env "$LINENO" "could not write $TV_ETC/env (see above)"
if [ "$result" = changed ]; then tv_installing; fi
TV_CHANGED=0
printf 'for f in %q %q; do if [ -r "$f" ]; then set -a; . "$f"; set +a; fi; done\n' "$TV_ETC/env" "$TV_ETC/secrets.env" |
tv_write_file "$TV_ROOT/etc/profile.d/trainvm-env.sh" 0644
hook=$(printf 'for f in %q %q; do if [ -r "$f" ]; then set -a; . "$f"; set +a; fi; done  # trainvm-env' "$TV_ETC/env" "$TV_ETC/secrets.env")
if [ -f "$TV_VENV/bin/activate" ] && ! grep -qF "$hook" "$TV_VENV/bin/activate"; then
printf '%s\n' "$hook" >>"$TV_VENV/bin/activate"
TV_CHANGED=1
fi
tv_write_file "$TV_ROOT/usr/local/bin/trainvm-run" 0755 <<'TRAINVM_RUN'
#!/bin/bash
# trainvm-run CMD...: run a training job as its own systemd unit (trainvm-job-*), with the
# profile's environment and the venv first on PATH; the idle watchdog counts these jobs.
set -euo pipefail
exec systemd-run --unit="trainvm-job-$(date +%Y%m%d-%H%M%S)" --collect --same-dir \
  --property=EnvironmentFile=/etc/trainvm/env --property=EnvironmentFile=-/etc/trainvm/secrets.env --uid="${SUDO_UID:-$(id -u)}" \
  --setenv=PATH="/opt/trainvm/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" -- "$@"
TRAINVM_RUN
if [ "$TV_CHANGED" = 1 ]; then tv_installing; fi
}
tv_nvme_mount() {
local mnt="$TV_ROOT$TV_SCRATCH" dev uuid devs=()
mapfile -t devs < <(tv_nvme_candidates | while read -r d; do readlink -f "$d"; done | sort -u)
if [ "${#devs[@]}" -eq 0 ]; then
if [ "$TV_NVME" = required ]; then
tv_fail data "$LINENO" "the profile asks for local NVMe, but $TV_INSTANCE_TYPE shows no local NVMe disk"
fi
tv_log "no local NVMe disk; data stays on the boot disk"
return 0
fi
printf 'nvme\n' >"$TV_STATE/disk-kind"
if mountpoint -q "$mnt"; then return 0; fi
tv_installing
if [ "${#devs[@]}" -gt 1 ]; then
dev="$TV_ROOT/dev/md/trainvm"
if ! dpkg-query -W -f='${Status}' mdadm 2>/dev/null | grep -q 'ok installed'; then
tv_apt install --no-install-recommends mdadm
fi
if [ ! -e "$dev" ] && ! mdadm --assemble "$dev" "${devs[@]}" >/dev/null 2>&1; then
tv_log "creating RAID0 over ${#devs[@]} local NVMe disks"
mdadm --create "$dev" --run --level=0 --raid-devices="${#devs[@]}" "${devs[@]}"
fi
else
dev=${devs[0]}
fi
if ! blkid "$dev" >/dev/null 2>&1; then
tv_log "formatting $dev (no filesystem found)"
mkfs.ext4 -F -q -m 0 -E lazy_itable_init=0,lazy_journal_init=0,discard "$dev"
fi
mkdir -p "$mnt"
mount -o defaults,nofail,discard "$dev" "$mnt"
uuid=$(blkid -s UUID -o value "$dev" || true)
if [ -n "$uuid" ]; then
{ grep -v ' # trainvm-scratch$' "$TV_ROOT/etc/fstab" 2>/dev/null || true
printf 'UUID=%s %s ext4 defaults,nofail,discard,x-systemd.device-timeout=10s 0 2 # trainvm-scratch\n' "$uuid" "$TV_SCRATCH"
} | tv_write_file "$TV_ROOT/etc/fstab" 0644
fi
}
tv_stage() {
local src=${TV_DATA_SRC[$1]} dest="$TV_ROOT${TV_DATA_DEST[$1]}" stage="$TV_ROOT${TV_DATA_STAGE[$1]}"
local marker="$TV_STATE/data.$1.done" files bytes
mkdir -p "$stage"
if [ "$stage" != "$dest" ]; then
mkdir -p "${dest%/*}"
ln -sfn "$stage" "$dest"
fi
if [ -f "$marker" ] && [ -n "$(find "$stage/" -mindepth 1 -print -quit)" ]; then
tv_log "data ${TV_DATA_DEST[$1]}: staged"
return 0
fi
if [ -f "$marker" ]; then tv_log "data ${TV_DATA_DEST[$1]} is empty (local disks are wiped on stop/start): staging again"; fi
tv_installing
case $src in
https://*) tv_retry curl -fsSL --retry 5 -o "$stage/${TV_DATA_NAME[$1]}" "$src" ;;
*) tv_fail data "$LINENO" "no copy tool was rendered for $src" ;;
esac
files=$(find "$stage/" -type f | wc -l)
bytes=$(find "$stage/" -type f -printf '%s\n' | awk '{s += $1} END {printf "%d\n", s}')
if [ "$files" -eq 0 ]; then tv_fail data "$LINENO" "nothing was copied from $src"; fi
printf '%s files, %s bytes\n' "$files" "$bytes" >"$marker"
tv_log "data ${TV_DATA_DEST[$1]}: $files files, $bytes bytes"
}
phase_data() {
local i
if [ "${#TV_DATA_SRC[@]}" -eq 0 ] && [ "$TV_NVME" = none ]; then
TV_PHASE_RESULT=skipped
return 0
fi
if [ "$TV_NVME" != none ]; then tv_nvme_mount; fi
for i in "${!TV_DATA_SRC[@]}"; do tv_stage "$i"; done
}
phase_watchdog() {
if [ "$TV_IDLE_MINUTES" -eq 0 ]; then systemctl disable --now trainvm-idle.timer >/dev/null 2>&1 || true; fi
if [ "$TV_MAX_RUN_SECONDS" -eq 0 ]; then systemctl disable --now trainvm-max-run.timer >/dev/null 2>&1 || true; fi
if [ "$TV_IDLE_MINUTES$TV_MAX_RUN_SECONDS" = 00 ]; then
TV_PHASE_RESULT=skipped
return 0
fi
TV_CHANGED=0
printf 'IDLE_MINUTES=%d\nON_IDLE=%s\nON_MAX_RUN=%s\nSHUTDOWN_DOES=%s\n' \
"$TV_IDLE_MINUTES" "$TV_ON_IDLE" "$TV_ON_MAX_RUN" "$TV_SHUTDOWN_DOES" | tv_write_file "$TV_ETC/watchdog.conf" 0644
tv_write_file "$TV_ROOT/usr/local/sbin/trainvm-lifecycle" 0755 <<'TRAINVM_LIFECYCLE_SH'
#!/bin/bash
set -euo pipefail
case ${1:-} in
  stop) api=Stop ;;
  delete) api=Terminate ;;
  *) exit 2 ;;
esac
conf=${TRAINVM_ROOT:-}/etc/trainvm/watchdog.conf
does=$1
if ! grep -qx "SHUTDOWN_DOES=$1" "$conf"; then
  echo "trainvm: ${2:-}: EC2 ${api}Instances"
  sdk=${TRAINVM_ROOT:-}/opt/trainvm/datatools/s3/bin/python
  if [ -x "$sdk" ]; then
    m=http://169.254.169.254/latest
    t=$(curl -fsS -m 10 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' $m/api/token || true)
    get() { curl -fsS -m 10 -H "X-aws-ec2-metadata-token: $t" "$m/meta-data/$1" || true; }
    if "$sdk" -c 'import boto3, sys
r = getattr(boto3.client("ec2", region_name=sys.argv[1]), sys.argv[3] + "_instances")(InstanceIds=[sys.argv[2]])
s = [v for k, v in r.items() if k.endswith("Instances")][0][0]["CurrentState"]["Name"]
print("EC2 %sInstances: %s" % (sys.argv[3].title(), s))
sys.exit(s not in ("stopping", "stopped", "shutting-down", "terminated"))' "$(get placement/region)" "$(get instance-id)" "${api,}"
    then exit 0; fi
  elif python3 "${TRAINVM_ROOT:-}/var/lib/trainvm/lib/trainvm_helper.py" ec2 "${api,}"; then exit 0; fi
  grep -qx SHUTDOWN_DOES=stop "$conf"
  does=stop
  echo "trainvm: the EC2 call failed"
fi
echo "trainvm: ${2:-}: shutting down from the guest: InstanceInitiatedShutdownBehavior does $does"
systemctl poweroff
TRAINVM_LIFECYCLE_SH
local enable=()
if [ "$TV_IDLE_MINUTES" -gt 0 ]; then
enable+=(trainvm-idle.timer)
tv_write_file "$TV_ROOT/usr/local/sbin/trainvm-idle-watchdog" 0755 <<'TRAINVM_WATCHDOG_SH'
#!/bin/bash
set -euo pipefail
ROOT="${TRAINVM_ROOT:-}"
conf="$ROOT/etc/trainvm/watchdog.conf"
minutes=$(sed -n 's/^IDLE_MINUTES=\([0-9]*\)$/\1/p' "$conf" 2>/dev/null || true)
action=$(sed -n 's/^ON_IDLE=\([a-z]*\)$/\1/p' "$conf" 2>/dev/null || true)
if [ "${minutes:-0}" -eq 0 ]; then exit 0; fi
busy() {
  local f
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null |
    awk '$1 + 0 >= 5 {b = 1} END {exit !b}' && return
  for f in "$ROOT"/proc/[0-9]*/fd/*; do
    case $(readlink "$f" 2>/dev/null) in
      /dev/nvidia[0-9]* | /dev/nvidia-uvm*) ;;
      *) continue ;;
    esac
    case $(cat "${f%/fd/*}/comm" 2>/dev/null) in
      nvidia-persiste* | nv-hostengine | nvidia-smi) ;;
      *) return 0 ;;
    esac
  done
  for f in "$ROOT"/proc/[0-9]*/comm; do
    case $(cat "$f" 2>/dev/null) in tmux* | screen | SCREEN) return 0 ;; esac
  done
  [ -n "$(who 2>/dev/null)" ] && return
  [ -n "$(ss -Htn state established '( sport = :22 )' 2>/dev/null)" ] && return
  [ -n "$(systemctl list-units --no-legend --plain --state=active 'trainvm-job-*' 2>/dev/null)" ] && return
  awk '{exit !($2 + 0 >= 1)}' "$ROOT/proc/loadavg" 2>/dev/null && return
  [ -e "$ROOT/var/lib/trainvm/lock" ] && ! flock -n "$ROOT/var/lib/trainvm/lock" true
}
run="$ROOT/run/trainvm"
mkdir -p "$run"
boot=$(cat "$ROOT/proc/sys/kernel/random/boot_id" 2>/dev/null || echo unknown)
now=$(date +%s)
if busy; then
  rm -f "$run/idle-since"
  exit 0
fi
read -r was since 2>/dev/null <"$run/idle-since" || true
if [ "${was:-}" != "$boot" ] || ! [[ ${since:-} =~ ^[0-9]+$ ]]; then
  echo "$boot $now" >"$run/idle-since"
  exit 0
fi
if [ $((now - since)) -ge $((minutes * 60)) ]; then
  echo "trainvm: idle for $(((now - since) / 60)) minutes (limit $minutes): ${action:-stop}"
  "$ROOT/usr/local/sbin/trainvm-lifecycle" "${action:-stop}" idle
fi
TRAINVM_WATCHDOG_SH
tv_write_file "$TV_ROOT/etc/systemd/system/trainvm-idle.service" 0644 <<'TRAINVM_UNIT'
[Unit]
Description=trainvm idle watchdog (one check)

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/trainvm-idle-watchdog
TRAINVM_UNIT
tv_write_file "$TV_ROOT/etc/systemd/system/trainvm-idle.timer" 0644 <<'TRAINVM_UNIT'
[Unit]
Description=trainvm idle watchdog, every minute

[Timer]
OnBootSec=5min
OnUnitActiveSec=1min

[Install]
WantedBy=timers.target
TRAINVM_UNIT
fi
if [ "$TV_MAX_RUN_SECONDS" -gt 0 ]; then
enable+=(trainvm-max-run.timer)
printf '[Service]\nType=oneshot\nExecStart=/usr/local/sbin/trainvm-lifecycle %s max-run\nRestart=on-failure\nRestartSec=60\n' \
"$TV_ON_MAX_RUN" | tv_write_file "$TV_ROOT/etc/systemd/system/trainvm-max-run.service" 0644
printf '[Timer]\nOnBootSec=%ds\nAccuracySec=1min\n\n[Install]\nWantedBy=timers.target\n' \
"$TV_MAX_RUN_SECONDS" | tv_write_file "$TV_ROOT/etc/systemd/system/trainvm-max-run.timer" 0644
fi
if [ "$TV_CHANGED" = 1 ]; then
tv_installing
systemctl daemon-reload
systemctl enable --now "${enable[@]}"
fi
}
tv_report() {
local out="$TV_STATE/report.json" err
err=$(printf '%s\n' "$TV_ERROR" | python3 "$TV_HELPER" redact 2>>"$TV_LOGDIR/helper.log") || err="(message withheld: redaction failed)"
if ! TV_ERROR="$err" tv_agent report "$1" --python "$TV_VENV/bin/python" >"$out.tmp" 2>>"$TV_LOGDIR/helper.log"; then
rm -f "$out.tmp"
fi
if [ ! -s "$out.tmp" ]; then
printf '{"schema": 1, "source": "vm", "status": "%s", "gpus": [], "driver": null, "cuda_driver_max": null, "framework": null, "cuda_toolkit": null, "cudnn": null, "python": null, "packages": {}, "os": null, "cpu": null, "memory_gib": null, "disk": null, "data": [], "phases": {}}\n' "$1" >"$out.tmp"
fi
mv -f "$out.tmp" "$out"
printf 'TRAINVM_REPORT=%s\n' "$(base64 -w0 <"$out")"
tv_publish report "@$out"
}
tv_finish() {
tv_status "$1"
tv_publish status "$1" final
tv_report "$1"
}
tv_main() {
tv_start
tv_phase preflight phase_preflight
tv_phase driver phase_driver
tv_phase cuda phase_cuda
tv_phase python phase_python
tv_phase packages phase_packages
tv_phase env phase_env
tv_phase data phase_data
tv_phase watchdog phase_watchdog
[ "$TV_PERF_BUDGET" = 0 ] || tv_phase perf phase_perf
TV_PHASE=report
tv_finish ready
}
tv_main "$@"