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
# canonical headers stopped being hard-coded to host;x-amz-date (curl PR #7966, 7.86.0); 7.88.1 signs them
# (tested), 7.81.0 signs host;x-amz-date only (curl issue #11738 shows its SignedHeaders). S3 wants every x-amz-*
# header signed ("Signature Calculations for the Authorization Header", S3 API reference), so with such a curl
# the identity request would be refused: there the bootstrap GETs the presigned URL `up` made with boto3
# ($TV_SIGNED_URL, 6 h at most; a restart never needs it: the verified copy stays on disk).
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
  local out=$1 rc=0 code err
  code=$(printf 'url = "%s"\n' "$TV_SIGNED_URL" |
    curl -sS --connect-timeout 10 --max-time 300 -K - -o "$out.part" -w '%{http_code}') || rc=$?
  if [ "$rc" -eq 0 ] && [ "$code" = 200 ]; then
    mv -f "$out.part" "$out"
    return 0
  fi
  err=$(grep -o '<Code>[A-Za-z]*</Code>' "$out.part" 2>/dev/null | head -n 1) || true
  err=${err#<Code>}
  err=${err%</Code>}
  rm -f "$out.part"
  if [ "$rc" -ne 0 ] || [ "$code" = 000 ] || [ "$code" -ge 500 ] || [ "$code" = 429 ]; then
    echo "tv_fetch: S3 did not answer the presigned GET of the payload (curl $rc, HTTP $code${err:+ $err})" >&2
    return 2
  fi
  [ "$code" != 404 ] || { echo "tv_fetch: no such payload object (HTTP 404${err:+ $err})" >&2; return 4; }
  echo "tv_fetch: S3 refused the presigned GET (HTTP $code${err:+ $err}: expired? \`trainvm up\` signs it for 6 h, less with temporary credentials)" >&2
  return 3
}

tv_fetch() {
  local url=$1 out=$2 rc=0 code role doc key secret token err version
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
