# Shared by the stub commands: argv recording and the fake package database.
# STUB_STATE (a folder) holds calls.log, installed packages, held packages, mounts, counters.
stub_record() {
  local a line="${0##*/}"
  for a in "$@"; do
    a=${a//$'\\'/\\\\}
    a=${a//$'\n'/\\n}
    a=${a//$'\t'/\\t}
    line+=$'\t'"$a"
  done
  printf '%s\n' "$line" >>"$STUB_STATE/calls.log"
}

installed_version() {  # latest recorded version of package $1
  awk -v p="$1" '$1 == p {v = $2} END {if (v != "") print v}' "$STUB_STATE/installed" 2>/dev/null
}

set_installed() { printf '%s %s\n' "$1" "$2" >>"$STUB_STATE/installed"; }

mark() { mkdir -p "$STUB_STATE/$1" && : >"$STUB_STATE/$1/$(printf '%s' "$2" | tr '/' '%')"; }
marked() { [ -e "$STUB_STATE/$1/$(printf '%s' "$2" | tr '/' '%')" ]; }

cuda_for_driver() {  # newest CUDA a driver branch supports (what nvidia-smi prints)
  case ${1%%.*} in
    535) echo 12.2 ;; 550) echo 12.4 ;; 560) echo 12.6 ;; 570) echo 12.8 ;; 580) echo 13.0 ;; *) echo 12.0 ;;
  esac
}

fake_files() {  # fake_files DIR: what a bucket copy leaves behind (2 files, 2048 bytes)
  mkdir -p "$1"
  head -c 1024 /dev/zero >"$1/part-00000"
  head -c 1024 /dev/zero >"$1/part-00001"
}

copy_attempt_fails() {  # STUB_COPY_FAIL=N: the first N copy attempts fail (transient errors)
  local n=0
  if [ -s "$STUB_STATE/copy-fails" ]; then n=$(<"$STUB_STATE/copy-fails"); fi
  if [ "$n" -lt "${STUB_COPY_FAIL:-0}" ]; then
    echo $((n + 1)) >"$STUB_STATE/copy-fails"
    return 0
  fi
  return 1
}
