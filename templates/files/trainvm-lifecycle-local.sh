#!/bin/bash
# trainvm-lifecycle ACTION EVENT on the local cloud (a QEMU VM on this machine; installed by the trainvm
# startup script; run by the idle watchdog and the max-run timer). ACTION is stop | delete.
#   stop: a poweroff inside the guest ends its QEMU: that is the local cloud's stop (the disk overlay stays;
#         `trainvm start` boots it again).
#   delete: the VM cannot remove its own folder from inside: it tells its endpoint (the status key "delete")
#         and powers off; the host side removes the folder of a VM so marked (`trainvm down` always does).
set -euo pipefail
action=${1:?usage: trainvm-lifecycle stop|delete EVENT}
event=${2:-manual}
case $action in
  stop)
    echo "trainvm: $event: powering the VM off (its QEMU exits; the disk stays)"
    systemctl poweroff
    ;;
  delete)
    echo "trainvm: $event: powering the VM off, marked for deletion (its folder is removed on this machine's side)"
    curl -fsS --noproxy '*' --max-time 10 -X PUT --data-binary "$event" "http://10.0.2.100/status/delete" >/dev/null || true
    systemctl poweroff
    ;;
  *)
    echo "trainvm-lifecycle: unknown action $action (stop or delete)" >&2
    exit 2
    ;;
esac
