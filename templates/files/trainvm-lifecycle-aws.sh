#!/bin/bash
# trainvm-lifecycle ACTION EVENT on EC2 (installed by the trainvm startup script; run by the idle
# watchdog and the max-run timer). ACTION is lifecycle.on_idle / lifecycle.on_max_run: stop | delete.
#   stop: the instance stops: compute billing ends, the EBS root volume stays (and bills); instance
#         store data is lost.
#   delete: the instance terminates: it and its EBS root volume (DeleteOnTermination) go.
# A shutdown from inside the guest does what the instance's InstanceInitiatedShutdownBehavior says, set
# at create (written here as SHUTDOWN_DOES): terminate when every lifecycle action in use is delete, else
# stop. Where that is ACTION, this shuts down. Otherwise (a mixed stop/delete: ACTION delete, the
# behaviour stop) this calls EC2 TerminateInstances itself (no AWS CLI: the images have none): the helper's
# `ec2` command, boto3 of the s3 tool's hash-locked venv (installed by the startup script for every AWS VM that
# calls an AWS API) with the instance profile's credentials, which botocore reads from IMDSv2 (the profile allows
# only the calls in use, on this VM only). Only when that call fails (boto3's bounded retries, a refusal, or the
# venv missing) does this shut down, and only where the shutdown behaviour loses no more than asked (stop).
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
  if python3 "${TRAINVM_ROOT:-}/var/lib/trainvm/lib/trainvm_helper.py" ec2 "${api,}"; then exit 0; fi
  grep -qx SHUTDOWN_DOES=stop "$conf"
  does=stop
  echo "trainvm: the EC2 call failed"
fi
echo "trainvm: ${2:-}: shutting down from the guest: InstanceInitiatedShutdownBehavior does $does"
systemctl poweroff
