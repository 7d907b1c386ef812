#!/bin/bash
# trainvm-lifecycle ACTION EVENT on EC2 (installed by the trainvm startup script; run by the idle
# watchdog and the max-run timer). ACTION is lifecycle.on_idle / lifecycle.on_max_run: stop | delete.
#   stop: the instance stops: compute billing ends, the EBS root volume stays (and bills); instance
#         store data is lost.
#   delete: the instance terminates: it and its EBS root volume (DeleteOnTermination) go.
# A shutdown from inside the guest does what the instance's InstanceInitiatedShutdownBehavior says, set
# at create (written here as SHUTDOWN_DOES): terminate when every lifecycle action in use is delete, else
# stop. Where that is ACTION, this shuts down. Otherwise (a mixed stop/delete: ACTION delete, the
# behaviour stop) this calls EC2 TerminateInstances itself (no AWS CLI: the images have none) with the
# instance profile's credentials from IMDSv2 (the profile allows only the calls in use, on this VM only):
# through boto3 in the s3:// copy tool's venv when the profile installed it (the helper then carries no
# EC2 code: AWS user data is 16 KB), else through the helper's own SigV4 call. Only when that call fails
# (after its bounded retries) does this shut down, and only where the shutdown behaviour loses no more
# than asked (stop).
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
