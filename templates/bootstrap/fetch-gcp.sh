# provisional (replaced by the gcp payload-store branch)
tv_fetch() {
  local code
  code=$(curl -sS -o "$2" -w '%{http_code}' --connect-timeout 10 --max-time 600 "$1") || code=000
  tv_http "$code"
}
