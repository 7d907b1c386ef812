#!/bin/bash
# trainvm bootstrap: this VM's user data. It fetches the provisioning payload (the startup script and
# the agent, one tar.gz) from the cloud's object store (TV_STORE) with this VM's own identity, refuses it unless its
# sha256 is the one below, unpacks it and runs its startup script. A verified copy stays on the boot
# disk: a restart re-hashes it and fetches nothing, also after the stored payload was deleted; a copy changed on
# disk is refused like a fetched mismatch (deleted and fetched again), and the payload is unpacked afresh.
# Console protocol: TRAINVM_STATUS=failed:bootstrap:LINE and a TRAINVM_REPORT line on failure.
set -Eeuo pipefail
umask 022
export LC_ALL=C
export PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TV_ROOT="${TRAINVM_ROOT:-}"
TV_SHA256='SHA256'
TV_URL='https://trainvm-ACCOUNT-us-east-1.s3.us-east-1.amazonaws.com/payloads/SHA256.tar.gz'
# shellcheck disable=SC2034  # read by fetch-aws.sh where the image's curl cannot sign the identity request
TV_SIGNED_URL=''
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
# tv_fetch URL OUT (templates/bootstrap/README.md, "fetch-aws.sh", says how and why)
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

# _tv_curl_signs_headers: this curl's --aws-sigv4 signs the x-amz-* headers it is given (>= 7.86.0, where curl PR
# #7966 replaced the hard-coded SignedHeaders=host;x-amz-date)
_tv_curl_signs_headers() {
  local v
  v=$(curl --version 2>/dev/null | head -n 1) || return 1
  v=${v#curl }
  v=${v%% *}
  [ "$(printf '%s\n7.86.0\n' "$v" | sort -V | head -n 1)" = 7.86.0 ]
}

# _tv_fetch_signed OUT: GET the presigned URL ($TV_SIGNED_URL, made by `up` with boto3) into OUT; the URL reaches
# curl through -K - (its signature never in argv). Used only where this curl cannot sign the identity request.
_tv_fetch_signed() {
  printf 'url = "%s"\n' "$TV_SIGNED_URL" | _tv_s3_get "$1" "the presigned GET of the payload" \
    "S3 refused the presigned GET (HTTP: expired? \`trainvm up\` signs it for 6 h, less with temporary credentials)"
}

# _tv_s3_get OUT WHAT REFUSED [CURL ARG...]: curl GETs into OUT, its config (credentials, or the URL) read from stdin
# (-K -); rc as tv_fetch; WHAT names the request, REFUSED says who was refused (HTTP 401/403/other 4xx). Only S3's
# <Code> of an error body is printed: the body can echo the signed request.
_tv_s3_get() {
  local out=$1 what=$2 refused=$3 rc=0 code err
  shift 3
  code=$(curl -sS --connect-timeout 10 --max-time 300 -K - -o "$out.part" -w '%{http_code}' "$@") || rc=$?
  if [ "$rc" -eq 0 ] && [ "$code" = 200 ]; then
    mv -f "$out.part" "$out"
    return 0
  fi
  err=$(grep -o '<Code>[A-Za-z]*</Code>' "$out.part" 2>/dev/null | head -n 1) || true
  err=${err#<Code>}
  err=${err%</Code>}
  rm -f "$out.part"
  if [ "$rc" -ne 0 ] || [ "$code" = 000 ] || [ "$code" -ge 500 ] || [ "$code" = 429 ]; then
    echo "tv_fetch: S3 did not answer $what (curl $rc, HTTP $code${err:+ $err})" >&2
    return 2
  fi
  if [ "$code" = 404 ]; then
    echo "tv_fetch: no such payload object (HTTP 404${err:+ $err})" >&2
    return 4
  fi
  echo "tv_fetch: ${refused/HTTP/HTTP $code${err:+ $err}}" >&2
  return 3
}

tv_fetch() {
  local url=$1 out=$2 rc=0 code role doc key secret token version
  local _tv_token
  if [ -n "${TV_SIGNED_URL:-}" ] && ! _tv_curl_signs_headers; then
    _tv_fetch_signed "$out"
    return
  fi
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
  version=$(curl --version 2>/dev/null | head -n 1) || true
  version=${version#curl }
  {
    printf 'user = "%s:%s"\n' "$key" "$secret"
    [ -z "$token" ] || printf 'header = "x-amz-security-token: %s"\n' "$token"
  } | _tv_s3_get "$out" "the GET of the payload" "S3 refused the instance profile $role (HTTP; curl ${version%% *})" \
      --aws-sigv4 "aws:amz:$TV_REGION:s3" -H "x-amz-content-sha256: $TV_EMPTY_SHA256" "$url"
}
# ---- end of fetch ----

tv_get_payload() {  # the verified payload at $TV_CACHE/$TV_SHA256.tar.gz: the copy on disk is re-hashed at each boot
  local out="$TV_CACHE/$TV_SHA256.tar.gz" rc missing=0 n=0 got
  if [ -f "$out" ]; then
    got=$(tv_sha "$out")
    if [ "$got" = "$TV_SHA256" ]; then
      tv_say "payload $TV_SHA256 already on disk: nothing fetched"
      return 0
    fi
    rm -f "$out"  # refused like a fetched mismatch; the store's content-addressed object is fetched again
    tv_say "payload copy on disk refused: $out has sha256 $got, this VM expects $TV_SHA256 (deleted, fetching it again)"
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

# the verified payload unpacked afresh into $TV_DIR at each boot (what an earlier boot unpacked is not hashed, so
# not trusted); /opt/trainvm/current points at it
tv_unpack() {
  rm -rf "$TV_DIR.tmp"
  mkdir -p "$TV_DIR.tmp"
  tar -xzf "$TV_CACHE/$TV_SHA256.tar.gz" -C "$TV_DIR.tmp" --no-same-owner --no-same-permissions
  : >"$TV_DIR.tmp/.complete"
  rm -rf "$TV_DIR"
  mv "$TV_DIR.tmp" "$TV_DIR"
  ln -sfn "$TV_DIR" "$TV_ROOT/opt/trainvm/current"
  mkdir -p "$TV_ROOT/usr/local/sbin"
  install -m 0755 "$TV_DIR/startup.sh" "$TV_ROOT/usr/local/sbin/trainvm-provision"
}

trap 'tv_boot_fail "$LINENO" "command failed (exit $?): $BASH_COMMAND"' ERR
tv_get_payload
tv_unpack
trap - ERR
exec "$TV_ROOT/usr/local/sbin/trainvm-provision"
