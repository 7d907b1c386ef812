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
