# shellcheck shell=bash
# tv_fetch URL OUT: GET a Blob Storage URL into OUT with this VM's managed identity (templates/bootstrap/README.md).
#   0 OUT holds the body (HTTP 200)   2 IMDS or the blob service did not answer / 5xx / 429
#   3 no token, or the token refused (401/403)   4 no such blob (404)
# The token comes from IMDS ($TV_MD) for resource https://storage.azure.com/ (header Metadata: true) and goes to
# curl on stdin (-K -) with x-ms-version (2017-11-09, the first version that takes OAuth; the kOps nodeup
# download does the same): never in argv, a file, stdout or stderr. The identity needs Storage Blob Data Reader
# on the container (granted by trainvm after the VM exists; role changes take a while to reach the token).
tv_fetch() {
  local url=$1 out=$2 resp code rc token=""
  resp=$(curl -sS --connect-timeout 5 --max-time 30 -H 'Metadata: true' -w '\n%{http_code}' \
    "${TV_MD:-http://169.254.169.254}/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fstorage.azure.com%2F" 2>/dev/null) || {
    echo "tv_fetch: the metadata server did not answer (identity token)" >&2
    return 2
  }
  code=${resp##*$'\n'}
  resp=${resp%$'\n'*}
  case $code in
    200) ;;
    429 | 404 | 410 | 5??) # IMDS busy or updating (Microsoft: retry these)
      echo "tv_fetch: the metadata server answered HTTP $code (identity token)" >&2
      return 2 ;;
    *)
      echo "tv_fetch: no identity token from the metadata server (HTTP $code; is a managed identity assigned?)" >&2
      return 3 ;;
  esac
  if [[ $resp =~ \"access_token\"[[:space:]]*:[[:space:]]*\"([^\"]+)\" ]]; then
    token=${BASH_REMATCH[1]}
  fi
  resp=""
  if [[ -z $token ]]; then
    echo "tv_fetch: the metadata server's answer holds no access_token" >&2
    return 3
  fi
  # printf is a bash builtin: the token is in no process's arguments; curl reads its headers from stdin
  if code=$(printf 'header = "Authorization: Bearer %s"\nheader = "x-ms-version: 2017-11-09"\n' "$token" |
    curl -sS --connect-timeout 10 --max-time 300 -K - -o "$out" -w '%{http_code}' "$url" 2>/dev/null); then
    rc=0
  else
    rc=$?
  fi
  token=""
  if [[ $code == 200 && $rc == 0 ]]; then
    return 0
  fi
  rm -f -- "$out"
  case $code in
    200) echo "tv_fetch: the download broke off (curl exit $rc): $url" >&2; return 2 ;;
    404) echo "tv_fetch: no such blob (HTTP 404): $url" >&2; return 4 ;;
    401 | 403) echo "tv_fetch: Blob Storage refused this VM's identity (HTTP $code): $url" >&2; return 3 ;;
    000 | "") echo "tv_fetch: Blob Storage did not answer: $url" >&2; return 2 ;;
    *) echo "tv_fetch: Blob Storage answered HTTP $code: $url" >&2; return 2 ;;
  esac
}
