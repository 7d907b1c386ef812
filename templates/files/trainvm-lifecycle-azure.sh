#!/bin/bash
# trainvm-lifecycle ACTION EVENT on Azure (installed by the trainvm startup script; run by the idle
# watchdog and the max-run timer). ACTION is lifecycle.on_idle / lifecycle.on_max_run: stop | delete.
# A shutdown from inside the guest leaves an Azure VM "Stopped" and still billed for compute, so
# this never powers off: it calls Azure Resource Manager with a token of the VM's managed identity from
# IMDS: its system-assigned one (holding a role on the VM's own resource group only), or the user-assigned
# one named by the VM's tag trainvm-identity (placement.identity.azure; its roles an administrator granted).
#   stop: POST .../virtualMachines/NAME/deallocate: compute billing ends, the OS disk and the
#         public IP stay (and bill); the temporary/NVMe disk is lost.
#   delete: DELETE the VM's resource group (what `trainvm down` does): nothing stays.
# On failure it exits non-zero: the watchdog retries a minute later, the max-run unit restarts.
set -euo pipefail
action=${1:?usage: trainvm-lifecycle stop|delete EVENT}
event=${2:-manual}
imds=http://169.254.169.254/metadata
arm=https://management.azure.com
get() { curl -fsS --max-time 10 -H Metadata:true "$imds/$1"; }
case $action in
  stop | delete) ;;
  *)
    echo "trainvm-lifecycle: unknown action $action (stop or delete)" >&2
    exit 2
    ;;
esac
vm=$(get 'instance/compute/resourceId?api-version=2021-02-01&format=text')
# placement.identity.azure: the tag trainvm-identity names the user-assigned identity (IMDS needs it named)
mi=$(get 'instance/compute/tagsList?api-version=2021-02-01' 2>/dev/null |
  sed -n 's/.*"name" *: *"trainvm-identity" *, *"value" *: *"\([^"]*\)".*/\1/p' || true)
token=$(get "identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.azure.com%2F${mi:+&msi_res_id=${mi//\//%2F}}" |
  sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p')
if [ -z "$vm" ] || [ -z "$token" ]; then
  echo "trainvm: $event: no resource id or managed-identity token from IMDS; cannot $action the VM" >&2
  exit 1
fi
if [ "$action" = stop ]; then
  echo "trainvm: $event: deallocating the VM through Azure Resource Manager (compute billing ends; disks stay)"
  curl -fsS --max-time 60 -X POST -H "Authorization: Bearer $token" -H 'Content-Length: 0' \
    "$arm$vm/deallocate?api-version=2024-07-01" >/dev/null
else
  echo "trainvm: $event: deleting the VM's resource group through Azure Resource Manager (nothing stays)"
  curl -fsS --max-time 60 -X DELETE -H "Authorization: Bearer $token" \
    "$arm${vm%%/providers/*}?api-version=2021-04-01" >/dev/null
fi
