#!/bin/bash
# trainvm idle watchdog (installed by the trainvm startup script; run every minute by
# trainvm-idle.timer). Powers the VM off once it has been idle for IDLE_MINUTES: no GPU
# utilisation, no SSH session, no running trainvm job and no provisioning run.
set -euo pipefail
ROOT="${TRAINVM_ROOT:-}"
STATE="$ROOT/var/lib/trainvm"
minutes=$(sed -n 's/^IDLE_MINUTES=\([0-9][0-9]*\)$/\1/p' "$ROOT/etc/trainvm/watchdog.conf" 2>/dev/null || true)
if [ -z "$minutes" ] || [ "$minutes" -eq 0 ]; then exit 0; fi
busy=""
gpu=$(nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null |
  awk '$1 + 0 > 0 {n++} END {print n + 0}' || true)
if [ "${gpu:-0}" -gt 0 ]; then busy="gpu utilisation"; fi
if [ -z "$busy" ] && [ -n "$(who 2>/dev/null || true)" ]; then busy="login session"; fi
if [ -z "$busy" ] && command -v ss >/dev/null 2>&1 &&
  [ -n "$(ss -Htn state established '( sport = :22 )' 2>/dev/null || true)" ]; then
  busy="ssh connection"
fi
if [ -z "$busy" ] &&
  [ -n "$(systemctl list-units --no-legend --plain --state=active 'trainvm-job-*' 2>/dev/null || true)" ]; then
  busy="trainvm job"
fi
if [ -z "$busy" ] && [ -e "$STATE/lock" ] && ! flock -n "$STATE/lock" true; then busy="provisioning"; fi
now=$(date +%s)
if [ -n "$busy" ]; then
  rm -f "$STATE/idle-since"
  exit 0
fi
if [ ! -s "$STATE/idle-since" ]; then printf '%s\n' "$now" >"$STATE/idle-since"; fi
since=$(<"$STATE/idle-since")
if [ $((now - since)) -ge $((minutes * 60)) ]; then
  echo "trainvm: idle for $(((now - since) / 60)) minutes (limit $minutes): powering off"
  rm -f "$STATE/idle-since"
  systemctl poweroff
fi
