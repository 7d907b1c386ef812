#!/bin/bash
# trainvm idle watchdog (installed by the trainvm startup script; run every minute by
# trainvm-idle.timer). Once the VM has been idle for IDLE_MINUTES it runs
# `trainvm-lifecycle ON_IDLE idle`, which stops (or deletes) the VM the way its cloud stops billing
# (never a bare poweroff where that keeps billing). Busy (any one resets the idle clock):
#   - a GPU at 5 % utilisation or more (nvidia-smi)
#   - a process holding /dev/nvidia* (other than nvidia-persistenced, DCGM's nv-hostengine, nvidia-smi)
#   - a tmux or screen server, a login session (who), an established SSH connection on port 22
#   - an active trainvm-run job (trainvm-job-* units)
#   - sustained CPU load: 5-minute load average >= 1.0 (one vCPU's worth of work, whatever the VM's
#     size: a single-threaded nohup/Docker/Jupyter job in a CPU-only phase counts; a threshold
#     scaled by vCPUs would call that job idle on a 200-vCPU VM)
#   - a provisioning run holding /var/lib/trainvm/lock
# The idle clock lives under /run (emptied at every boot) and is keyed to the boot id, so a clock
# left by a previous boot (stop/start) never counts. If the action fails, the next check retries.
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
