# shellcheck shell=bash
# tv_fetch URL OUT (templates/bootstrap/README.md, "fetch-local.sh", says how and why)
tv_fetch() {
  local url=$1 out=$2 code rc=0
  code=$(curl -sS --noproxy '*' --connect-timeout 10 --max-time 300 -o "$out" -w '%{http_code}' "$url") || rc=$?
  if [ "$rc" -ne 0 ]; then
    rm -f -- "$out"
    echo "tv_fetch: this VM's endpoint did not answer (curl exit $rc)" >&2
    return 2
  fi
  case $code in
    200) return 0 ;;
    401 | 403) rc=3 ;;
    404) rc=4 ;;
    *) rc=2 ;;
  esac
  rm -f -- "$out"
  echo "tv_fetch: this VM's endpoint answered HTTP $code" >&2
  return "$rc"
}
