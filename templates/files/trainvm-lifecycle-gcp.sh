#!/bin/bash
# trainvm-lifecycle ACTION EVENT on Compute Engine (installed by the trainvm startup script; run by
# the idle watchdog). ACTION is lifecycle.on_idle: stop | delete.
#   stop: a shutdown from inside the guest leaves a GCE instance TERMINATED (stopped): compute
#         billing ends, the boot disk and its data stay (and bill); local SSD data is lost.
#   delete: instances.delete through the Compute API with the VM's own service-account token
#         (the instance has the compute scope only when on_idle is delete): the VM and its disks go.
# max_run_hours needs no timer here: GCE enforces scheduling.maxRunDuration itself.
set -euo pipefail
action=${1:?usage: trainvm-lifecycle stop|delete EVENT}
event=${2:-manual}
md=http://metadata.google.internal/computeMetadata/v1
get() { curl -fsS --max-time 10 -H 'Metadata-Flavor: Google' "$md/$1"; }
case $action in
  stop)
    echo "trainvm: $event: stopping the VM (compute billing ends; the boot disk stays)"
    systemctl poweroff
    ;;
  delete)
    token=$(get instance/service-accounts/default/token | sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p')
    if [ -z "$token" ]; then
      echo "trainvm: $event: no service-account token from the metadata server; not deleting" >&2
      exit 1
    fi
    project=$(get project/project-id)
    zone=$(get instance/zone)
    name=$(get instance/name)
    echo "trainvm: $event: deleting the VM and its disks (instances.delete)"
    curl -fsS --max-time 60 -X DELETE -H "Authorization: Bearer $token" \
      "https://compute.googleapis.com/compute/v1/projects/$project/zones/${zone##*/}/instances/$name" >/dev/null
    ;;
  *)
    echo "trainvm-lifecycle: unknown action $action (stop or delete)" >&2
    exit 2
    ;;
esac
