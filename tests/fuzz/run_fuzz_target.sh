#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from its committed corpus, as a ctest case:
#   run_fuzz_target.sh BINARY CORPUS_DIR SKIP_FILE ARTIFACT_DIR SECONDS RSS_MB MALLOC_MB TIMEOUT_S
# Exit 0: no crash, hang (an input running past TIMEOUT_S), leak, or memory past the bounds
# (RSS_MB for the process, MALLOC_MB for one allocation) in SECONDS; the failing input is kept
# in ARTIFACT_DIR. Exit 77 (ctest's skip) when the target was not built, with SKIP_FILE's reason.
# New inputs the run finds go to a temporary folder: the committed corpus is never changed.
# libFuzzer's own exit code for a finding is 77, ctest's skip: findings exit 1 here instead.
set -euo pipefail

readonly binary=$1 corpus=$2 skip_file=$3 artifacts=$4 seconds=$5 rss_mb=$6 malloc_mb=$7 timeout_s=$8

if [ ! -x "$binary" ]; then
  if [ -s "$skip_file" ]; then
    echo "skipped: $(cat "$skip_file")"
  else
    echo "skipped: $binary was not built (no clang++ found when the build was configured; install Debian's clang and libclang-rt-14-dev, scripts/setup.sh)"
  fi
  exit 77
fi

found=$(mktemp -d)
trap 'rm -rf "$found"' EXIT
mkdir -p "$artifacts"
name=$(basename "$binary")
# Each target writes its input to a file under TMPDIR: keep those with the run's own files.
export TMPDIR=$found
# Leaks that are LibTorch's own, not mgpu's (the file says which and why).
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan_suppressions.txt${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
mkdir -p "$found/corpus"
exec "$binary" "$found/corpus" "$corpus" \
  -max_total_time="$seconds" -rss_limit_mb="$rss_mb" -malloc_limit_mb="$malloc_mb" -timeout="$timeout_s" \
  -artifact_prefix="$artifacts/$name-" -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1
