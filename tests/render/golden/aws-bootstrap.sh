#!/bin/bash
# trainvm bootstrap: this VM's user data. It fetches the provisioning payload (the startup script and
# the agent, one tar.gz) from the cloud's object store (TV_STORE) with this VM's own identity, refuses it unless its
# sha256 is the one below, unpacks it and runs its startup script. A verified copy stays on the boot
# disk: a restart fetches nothing, also after the stored payload was deleted.
# Console protocol: TRAINVM_STATUS=failed:bootstrap:LINE and a TRAINVM_REPORT line on failure.
set -Eeuo pipefail
umask 022
export LC_ALL=C
export PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TV_ROOT="${TRAINVM_ROOT:-}"
TV_SHA256='c4f43774696a6641df4b17bd066303868f76120d77d5042c906260fb03fbe4ac'
TV_URL='https://trainvm-ACCOUNT-us-east-1.s3.us-east-1.amazonaws.com/payloads/c4f43774696a6641df4b17bd066303868f76120d77d5042c906260fb03fbe4ac.tar.gz'
# shellcheck disable=SC2034  # TV_REGION, TV_MD: read by the fetch function of some clouds
TV_REGION='us-east-1'
TV_HASH='8e6b75dc3316d4dc813d4abe1c94392c0a81828f91b31bc24f06bc7e3a02ae33'
TV_STORE='S3'
TV_ACCESS='s3:GetObject on the object for the instance profile'
TV_MD_DEFAULT='http://169.254.169.254'
# shellcheck disable=SC2034
TV_MD="${TRAINVM_METADATA_URL:-$TV_MD_DEFAULT}"
TV_DEADLINE=$((SECONDS + ${TRAINVM_FETCH_SECONDS:-1200}))  # role/IAM grants can take minutes to reach the store
TV_MISSING_TRIES=${TRAINVM_MISSING_TRIES:-20}
TV_SLEEP=${TRAINVM_RETRY_SLEEP:-15}
TV_CACHE="$TV_ROOT/var/lib/trainvm/payload"
TV_DIR="$TV_ROOT/opt/trainvm/payload/$TV_SHA256"

tv_say() { printf 'trainvm bootstrap: %s\n' "$*" >&2; }

tv_http() {  # HTTP status -> the tv_fetch return code (templates/bootstrap/README.md)
  case $1 in
    200) return 0 ;;
    401 | 403) return 3 ;;
    404) return 4 ;;
    *) return 2 ;;
  esac
}

tv_boot_fail() {  # tv_boot_fail LINE MESSAGE: the failed status and a report for `trainvm verify`, exit 1
  local line=$1 json
  shift
  tv_say "ERROR: $*"
  json=$(printf '{"schema": 1, "source": "vm", "status": "failed:bootstrap:%s", "profile_hash": "%s", "error": "%s"}' \
    "$line" "$TV_HASH" "$(printf '%s' "$*" | tr -d '"\\' | tr '\n' ' ')")
  printf 'TRAINVM_STATUS=failed:bootstrap:%s\n' "$line"
  printf 'TRAINVM_REPORT=%s\n' "$(printf '%s' "$json" | base64 -w0)"
  exit 1
}

tv_sha() { sha256sum <"$1" | cut -d' ' -f1; }

# ---- tv_fetch URL OUT: this cloud's templates/bootstrap/fetch-CLOUD.sh ----
# shellcheck shell=bash
# tv_fetch URL OUT: GET the payload object URL (S3) into OUT with this VM's instance profile (README.md here).
#
# The way kOps fetches from S3 without an SDK (kubernetes/kops pkg/model/resources/nodeup.go): an IMDSv2 token
# (PUT $TV_MD/latest/api/token), the instance profile's role name and temporary credentials from
# $TV_MD/latest/meta-data/iam/security-credentials/[ROLE], then curl signs the GET itself with
# --aws-sigv4 "aws:amz:$TV_REGION:s3" (SigV4 needs the bucket's own region: the bootstrap sets TV_REGION).
# The key pair and the session token reach curl only through -K - on stdin (a pipe from bash's builtin printf):
# never in argv, a file, stdout or stderr. S3 error bodies can echo the signed request (SignatureDoesNotMatch
# carries the canonical request, session token included), so only their <Code> is printed.
#
# curl: --aws-sigv4 exists since 7.75.0; Ubuntu 22.04 ships 7.81.0, Debian 12 7.88.1, Ubuntu 24.04 8.5.0.
# curl signs the x-amz-* headers given with -H (x-amz-security-token, x-amz-content-sha256) only since its
# canonical headers stopped being hard-coded to host;x-amz-date (curl PR #7966); 7.88.1 signs them (tested),
# 7.81.0 signs host;x-amz-date only (curl issue #11738 shows its SignedHeaders). S3 wants every x-amz-* header
# signed ("Signature Calculations for the Authorization Header", S3 API reference), so with an old curl S3 may
# refuse the request (403): the failure line names the curl version.
# x-amz-content-sha256 is the SHA-256 of the empty body: S3 requires the header on SigV4 requests and curl
# adds it itself only in newer versions (curl issue #8810).
#
# Return codes (README.md): 0 OUT written (HTTP 200); 2 no answer or 5xx/429 (IMDS or S3); 3 no token, no
# instance profile or credentials, or S3 refused (401/403, and S3's other 4xx: an expired/invalid token, a
# wrong region); 4 no such object (404: only with s3:ListBucket, else S3 answers a missing key 403).

TV_EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

# _tv_imds PATH: GET an IMDSv2 path (the session token in $_tv_token, passed on stdin) to stdout; rc as tv_fetch
_tv_imds() {
  local body code rc=0
  body=$(printf 'header = "X-aws-ec2-metadata-token: %s"\n' "$_tv_token" |
    curl -sS --connect-timeout 2 --max-time 10 -K - -w '\n%{http_code}' "$TV_MD/latest/$1") || rc=$?
  code=${body##*$'\n'}
  body=${body%$'\n'*}
  if [ "$rc" -ne 0 ] || [ "$code" = 000 ] || [ "$code" -ge 500 ] || [ "$code" = 429 ]; then
    echo "tv_fetch: the instance metadata service did not answer $1 (curl $rc, HTTP $code)" >&2
    return 2
  fi
  if [ "$code" != 200 ] || [ -z "$body" ]; then
    echo "tv_fetch: the instance metadata service gave no $1 (HTTP $code): no instance profile?" >&2
    return 3
  fi
  printf '%s\n' "$body"
}

# _tv_json_field NAME JSON: the string value of "NAME" in the IMDS credentials document
_tv_json_field() {
  local re="\"$1\"[[:space:]]*:[[:space:]]*\"([^\"]*)\""
  [[ $2 =~ $re ]] && printf '%s' "${BASH_REMATCH[1]}"
}

tv_fetch() {
  local url=$1 out=$2 rc=0 code role doc key secret token err version
  local _tv_token
  _tv_token=$(curl -sS --connect-timeout 2 --max-time 10 -X PUT -H "X-aws-ec2-metadata-token-ttl-seconds: 300" \
    -w '\n%{http_code}' "$TV_MD/latest/api/token") || rc=$?
  code=${_tv_token##*$'\n'}
  _tv_token=${_tv_token%$'\n'*}
  if [ "$rc" -ne 0 ] || [ "$code" = 000 ] || [ "$code" -ge 500 ] || [ "$code" = 429 ]; then
    echo "tv_fetch: no IMDSv2 token: the instance metadata service did not answer (curl $rc, HTTP $code)" >&2
    return 2
  fi
  if [ "$code" != 200 ] || ! [[ $_tv_token =~ ^[A-Za-z0-9+/=_-]+$ ]]; then
    echo "tv_fetch: no IMDSv2 token (HTTP $code)" >&2
    return 3
  fi
  role=$(_tv_imds meta-data/iam/security-credentials/) || return $?
  role=${role%%$'\n'*}
  doc=$(_tv_imds "meta-data/iam/security-credentials/$role") || return $?
  key=$(_tv_json_field AccessKeyId "$doc") || true
  secret=$(_tv_json_field SecretAccessKey "$doc") || true
  token=$(_tv_json_field Token "$doc") || true
  if ! [[ $key =~ ^[A-Z0-9]+$ && $secret =~ ^[A-Za-z0-9+/=]+$ && $token =~ ^[A-Za-z0-9+/=]*$ ]]; then
    echo "tv_fetch: the instance profile $role has no usable credentials in the instance metadata" >&2
    return 3
  fi
  rc=0
  code=$({
    printf 'user = "%s:%s"\n' "$key" "$secret"
    [ -z "$token" ] || printf 'header = "x-amz-security-token: %s"\n' "$token"
  } | curl -sS --connect-timeout 10 --max-time 300 --aws-sigv4 "aws:amz:$TV_REGION:s3" \
      -H "x-amz-content-sha256: $TV_EMPTY_SHA256" -K - -o "$out.part" -w '%{http_code}' "$url") || rc=$?
  if [ "$rc" -eq 0 ] && [ "$code" = 200 ]; then
    mv -f "$out.part" "$out"
    return 0
  fi
  err=$(grep -o '<Code>[A-Za-z]*</Code>' "$out.part" 2>/dev/null | head -n 1) || true
  err=${err#<Code>}
  err=${err%</Code>}
  rm -f "$out.part"
  if [ "$rc" -ne 0 ] || [ "$code" = 000 ] || [ "$code" -ge 500 ] || [ "$code" = 429 ]; then
    echo "tv_fetch: S3 did not answer the GET of the payload (curl $rc, HTTP $code${err:+ $err})" >&2
    return 2
  fi
  if [ "$code" = 404 ]; then
    echo "tv_fetch: no such payload object (HTTP 404${err:+ $err})" >&2
    return 4
  fi
  version=$(curl --version 2>/dev/null | head -n 1) || true
  version=${version#curl }
  echo "tv_fetch: S3 refused the instance profile $role (HTTP $code${err:+ $err}; curl ${version%% *})" >&2
  return 3
}
# ---- end of fetch ----

tv_get_payload() {  # the verified payload at $TV_CACHE/$TV_SHA256.tar.gz, fetched unless already there
  local out="$TV_CACHE/$TV_SHA256.tar.gz" rc missing=0 n=0 got
  if [ -f "$out" ] && [ "$(tv_sha "$out")" = "$TV_SHA256" ]; then
    tv_say "payload $TV_SHA256 already on disk: nothing fetched"
    return 0
  fi
  mkdir -p "$TV_CACHE"
  chmod 0700 "$TV_CACHE"
  while :; do
    n=$((n + 1))
    rc=0
    tv_fetch "$TV_URL" "$out.part" || rc=$?
    if [ "$rc" = 0 ]; then
      got=$(tv_sha "$out.part")
      if [ "$got" != "$TV_SHA256" ]; then  # the object is content-addressed: a mismatch does not heal
        rm -f "$out.part"
        tv_boot_fail "$LINENO" "payload hash mismatch: $TV_URL has sha256 $got, this VM expects $TV_SHA256 (refused, nothing run)"
      fi
      mv -f "$out.part" "$out"
      tv_say "payload $TV_SHA256 fetched ($(stat -c %s "$out") bytes) and verified"
      return 0
    fi
    rm -f "$out.part"
    if [ "$rc" = 4 ]; then
      missing=$((missing + 1))
      if [ "$missing" -ge "$TV_MISSING_TRIES" ]; then
        tv_boot_fail "$LINENO" "payload missing: $TV_URL does not exist (deleted, or the store was emptied); run \`trainvm down\` and \`trainvm up\` again"
      fi
    fi
    if [ "$SECONDS" -ge "$TV_DEADLINE" ]; then
      case $rc in
        3) tv_boot_fail "$LINENO" "identity without read access: this VM's identity may not read $TV_URL from $TV_STORE ($TV_ACCESS)" ;;
        4) tv_boot_fail "$LINENO" "payload missing: $TV_URL does not exist" ;;
        *) tv_boot_fail "$LINENO" "store unreachable: $TV_URL did not answer after $n attempts" ;;
      esac
    fi
    tv_say "attempt $n: fetch returned $rc; trying again in ${TV_SLEEP}s"
    sleep "$TV_SLEEP"
  done
}

tv_unpack() {  # the payload unpacked once into $TV_DIR; /opt/trainvm/current points at it
  if [ ! -f "$TV_DIR/.complete" ]; then
    rm -rf "$TV_DIR.tmp"
    mkdir -p "$TV_DIR.tmp"
    tar -xzf "$TV_CACHE/$TV_SHA256.tar.gz" -C "$TV_DIR.tmp" --no-same-owner --no-same-permissions
    : >"$TV_DIR.tmp/.complete"
    rm -rf "$TV_DIR"
    mv "$TV_DIR.tmp" "$TV_DIR"
  fi
  ln -sfn "$TV_DIR" "$TV_ROOT/opt/trainvm/current"
  mkdir -p "$TV_ROOT/usr/local/sbin"
  install -m 0755 "$TV_DIR/startup.sh" "$TV_ROOT/usr/local/sbin/trainvm-provision"
}

trap 'tv_boot_fail "$LINENO" "command failed (exit $?): $BASH_COMMAND"' ERR
tv_get_payload
tv_unpack
trap - ERR
exec "$TV_ROOT/usr/local/sbin/trainvm-provision"
