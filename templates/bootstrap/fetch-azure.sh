# shellcheck shell=bash
# tv_fetch URL OUT (templates/bootstrap/README.md, "fetch-azure.sh", says how and why)
tv_fetch() {
  local url=$1 out=$2 resp code rc token="" mi=""
  # placement.identity.azure: the VM's tag trainvm-identity names its user-assigned identity, which IMDS needs named
  resp=$(curl -sS --connect-timeout 5 --max-time 30 -H 'Metadata: true' \
    "${TV_MD:-http://169.254.169.254}/metadata/instance/compute/tagsList?api-version=2021-02-01" 2>/dev/null) || resp=""
  if [[ $resp =~ \"name\"[[:space:]]*:[[:space:]]*\"trainvm-identity\"[[:space:]]*,[[:space:]]*\"value\"[[:space:]]*:[[:space:]]*\"([^\"]+)\" ]]; then
    mi="&msi_res_id=${BASH_REMATCH[1]//\//%2F}"
  fi
  resp=$(curl -sS --connect-timeout 5 --max-time 30 -H 'Metadata: true' -w '\n%{http_code}' \
    "${TV_MD:-http://169.254.169.254}/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fstorage.azure.com%2F$mi" 2>/dev/null) || {
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
