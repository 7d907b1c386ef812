# shellcheck shell=bash
# tv_fetch URL OUT (templates/bootstrap/README.md, "fetch-gcp.sh", says how and why)
tv_fetch() {
  local _tv_rc=0 _tv_x=0
  case $- in *x*) _tv_x=1; set +x ;; esac
  _tv_fetch_gcp "$@" || _tv_rc=$?
  if [ "$_tv_x" = 1 ]; then set -x; fi
  return "$_tv_rc"
}

_tv_fetch_gcp() {
  local url=$1 out=$2 md=${TV_MD:-http://metadata.google.internal} body code token rc=0
  body=$(curl -sS --noproxy '*' --connect-timeout 5 --max-time 30 -H 'Metadata-Flavor: Google' -w '\n%{http_code}' \
    "$md/computeMetadata/v1/instance/service-accounts/default/token") || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "tv_fetch: the metadata server did not answer for a token (curl exit $rc)" >&2
    return 2
  fi
  code=${body##*$'\n'}
  body=${body%$'\n'*}
  case $code in
    200) ;;
    429 | 5??)
      echo "tv_fetch: the metadata server answered HTTP $code for a token" >&2
      return 2 ;;
    *)
      echo "tv_fetch: the metadata server gave no token (HTTP $code): no service account on this VM?" >&2
      return 3 ;;
  esac
  if [[ $body =~ \"access_token\"[[:space:]]*:[[:space:]]*\"([A-Za-z0-9._~+/=-]+)\" ]]; then
    token=${BASH_REMATCH[1]}
    [[ $code =~ ^[0-9]+$ ]] || :  # BASH_REMATCH no longer holds the token
  else
    echo "tv_fetch: the metadata server's answer holds no access token" >&2
    return 3
  fi
  body=
  code=$(printf 'header = "Authorization: Bearer %s"\n' "$token" |
    curl -sS -K - --connect-timeout 10 --max-time 300 -o "$out" -w '%{http_code}' "$url") || rc=$?
  token=
  if [ "$rc" -ne 0 ]; then
    rm -f -- "$out"
    echo "tv_fetch: the store did not answer (curl exit $rc)" >&2
    return 2
  fi
  case $code in
    200) return 0 ;;
    401 | 403) rc=3 ;;
    404) rc=4 ;;
    *) rc=2 ;;
  esac
  rm -f -- "$out"
  echo "tv_fetch: the store answered HTTP $code" >&2
  return "$rc"
}
