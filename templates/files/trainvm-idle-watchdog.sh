#!/bin/bash
# trainvm idle watchdog (installed by the trainvm startup script; run every minute by
# trainvm-idle.timer). Once the VM has been idle for IDLE_MINUTES it runs
# `trainvm-lifecycle ON_IDLE idle`, which stops (or deletes) the VM the way its cloud stops billing
# (never a bare poweroff where that keeps billing). Busy (any one resets the idle clock):
#   - a GPU at GPU_IDLE_UTIL % utilisation or more (nvidia-smi; default 5)
#   - a process holding /dev/nvidia* (other than nvidia-persistenced, DCGM's nv-hostengine, nvidia-smi),
#     unless every GPU has stayed below GPU_IDLE_UTIL % for GPU_IDLE_MINUTES while it holds them (the
#     stalled-GPU rule: a hung training loop, an idle notebook kernel); then neither it nor an active
#     trainvm-run job counts, and the other signals decide. GPU_IDLE_MINUTES=0: a holder is always busy
#   - a tmux or screen server, a login session (who), an established SSH connection on port 22
#   - an active trainvm-run job (trainvm-job-* units), unless the GPU has stalled (above)
#   - sustained CPU load: 5-minute load average >= 1.0 (one vCPU's worth of work, whatever the VM's
#     size: a single-threaded nohup/Docker/Jupyter job in a CPU-only phase counts; a threshold
#     scaled by vCPUs would call that job idle on a 200-vCPU VM)
#   - a provisioning run holding /var/lib/trainvm/lock
# The idle clock (and the stalled-GPU clock, gpu-low-since) live under /run (emptied at every boot) and
# are keyed to the boot id, so a clock left by a previous boot (stop/start) never counts. If the action
# fails, the next check retries.
set -euo pipefail
ROOT="${TRAINVM_ROOT:-}"
conf="$ROOT/etc/trainvm/watchdog.conf"
minutes=$(sed -n 's/^IDLE_MINUTES=\([0-9]*\)$/\1/p' "$conf" 2>/dev/null || true)
action=$(sed -n 's/^ON_IDLE=\([a-z]*\)$/\1/p' "$conf" 2>/dev/null || true)
gpu_util=$(sed -n 's/^GPU_IDLE_UTIL=\([0-9]*\)$/\1/p' "$conf" 2>/dev/null || true)
gpu_minutes=$(sed -n 's/^GPU_IDLE_MINUTES=\([0-9]*\)$/\1/p' "$conf" 2>/dev/null || true)
gpu_util=${gpu_util:-5} gpu_minutes=${gpu_minutes:-0}
if [ "${minutes:-0}" -eq 0 ]; then exit 0; fi
run="$ROOT/run/trainvm"
mkdir -p "$run"
boot=$(cat "$ROOT/proc/sys/kernel/random/boot_id" 2>/dev/null || echo unknown)
now=$(date +%s)
stalled=

clock_age() {  # clock_age FILE: seconds since the clock in FILE started this boot; starts it when absent/stale
  local was since
  read -r was since 2>/dev/null <"$1" || true
  if [ "${was:-}" != "$boot" ] || ! [[ ${since:-} =~ ^[0-9]+$ ]]; then
    echo "$boot $now" >"$1"
    echo 0
  else
    echo $((now - since))
  fi
}

holds_gpu() {  # one find over every process's fds (no process per fd: a job's thousands of open files cost
  # one readlink system call each, inside find); then the holders' comm, read by the shell
  local fd comm
  while IFS= read -r fd; do
    comm=
    read -r comm 2>/dev/null <"${fd%/fd/*}/comm" || true
    case $comm in
      nvidia-persiste* | nv-hostengine | nvidia-smi) ;;
      *) return 0 ;;
    esac
  done < <(find "$ROOT"/proc/[0-9]*/fd -mindepth 1 -maxdepth 1 \( -lname '/dev/nvidia[0-9]*' -o -lname '/dev/nvidia-uvm*' \) -print 2>/dev/null || true)
  return 1
}

busy() {
  local f c
  if nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null |
    awk -v t="$gpu_util" '$1 + 0 >= t {b = 1} END {exit !b}'; then
    rm -f "$run/gpu-low-since"
    return 0
  fi
  if holds_gpu; then
    [ "$gpu_minutes" -gt 0 ] || return 0
    [ "$(clock_age "$run/gpu-low-since")" -ge $((gpu_minutes * 60)) ] || return 0
    stalled=1  # held below gpu_util % for gpu_minutes: the holder (and its job) is not working
  else
    rm -f "$run/gpu-low-since"
  fi
  for f in "$ROOT"/proc/[0-9]*/comm; do
    c=
    read -r c 2>/dev/null <"$f" || true
    case $c in tmux* | screen | SCREEN) return 0 ;; esac
  done
  [ -n "$(who 2>/dev/null)" ] && return
  [ -n "$(ss -Htn state established '( sport = :22 )' 2>/dev/null)" ] && return
  [ -z "$stalled" ] && [ -n "$(systemctl list-units --no-legend --plain --state=active 'trainvm-job-*' 2>/dev/null)" ] && return
  awk '{exit !($2 + 0 >= 1)}' "$ROOT/proc/loadavg" 2>/dev/null && return
  [ -e "$ROOT/var/lib/trainvm/lock" ] && ! flock -n "$ROOT/var/lib/trainvm/lock" true
}

if busy; then
  rm -f "$run/idle-since"
  exit 0
fi
since=$((now - $(clock_age "$run/idle-since")))
if [ "$since" -eq "$now" ]; then exit 0; fi
if [ $((now - since)) -ge $((minutes * 60)) ]; then
  why=${stalled:+ (GPU held below $gpu_util % for over $gpu_minutes minutes counts as idle)}
  echo "trainvm: idle for $(((now - since) / 60)) minutes (limit $minutes): ${action:-stop}$why"
  "$ROOT/usr/local/sbin/trainvm-lifecycle" "${action:-stop}" idle
fi
