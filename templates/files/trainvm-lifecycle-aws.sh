#!/bin/bash
# trainvm-lifecycle ACTION EVENT on EC2 (installed by the trainvm startup script; run by the idle
# watchdog and the max-run timer). ACTION is lifecycle.on_idle / lifecycle.on_max_run: stop | delete.
#   stop: StopInstances: compute billing ends, the EBS root volume stays (and bills); instance
#         store data is lost.
#   delete: TerminateInstances: the instance and its EBS root volume (DeleteOnTermination) go.
# The EC2 API call needs an instance profile allowing ec2:StopInstances / ec2:TerminateInstances on
# this instance, and the AWS CLI, which AWS's Ubuntu/Debian images do not have. Without them it falls back
# to a shutdown from inside the guest, which does what the instance's InstanceInitiatedShutdownBehavior
# says (terminate only when every lifecycle action in use is delete, else stop; written here as
# SHUTDOWN_DOES): always when that is stop (it never loses more than asked) or equals ACTION.
set -euo pipefail
case ${1:-} in
  stop) api=stop-instances ;;
  delete) api=terminate-instances ;;
  *) exit 2 ;;
esac
m=http://169.254.169.254/latest
t=$(curl -fsS -m 10 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' $m/api/token || true)
get() { curl -fsS -m 10 -H "X-aws-ec2-metadata-token: $t" "$m/meta-data/$1" || true; }
echo "trainvm: ${2:-}: aws ec2 $api"
if aws ec2 $api --region "$(get placement/region)" --instance-ids "$(get instance-id)" >/dev/null; then exit 0; fi
# the call failed: shut down only where the shutdown behaviour loses no more than asked
grep -qx "SHUTDOWN_DOES=\(stop\|$1\)" "${TRAINVM_ROOT:-}/etc/trainvm/watchdog.conf"
echo "trainvm: the EC2 call failed: shutting down (InstanceInitiatedShutdownBehavior)"
systemctl poweroff
