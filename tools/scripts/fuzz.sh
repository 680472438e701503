#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz, clang, ASan+UBSan) and runs each on its committed seed
# corpus, for a time or a number of executions each. Exits non-zero when a harness finds anything
# (a crash, a sanitizer report, a leak, a timeout, an allocation over the limit); the input that
# did it is kept in build-fuzz/findings/.
#   tools/scripts/fuzz.sh                 # 60 s per harness
#   tools/scripts/fuzz.sh --runs 1000000  # the long run recorded in tools/bench/RESULTS.md
#   tools/scripts/fuzz.sh --time 10 recipe idx
#   tools/scripts/fuzz.sh --seed 1 --runs 20000   # what CI runs: the same inputs on every machine
# Needs clang and libFuzzer (tools/scripts/setup.sh installs them) and a build of liboctet.so in build/
# (built here if missing; OCTET_BUILD_DIR picks another folder).
set -euo pipefail
cd "$(dirname "$0")/../.."

limit=(-max_total_time=60)
seed=()
harnesses=()
while (($#)); do
  case "$1" in
    --time) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    --seed) seed=(-seed="$2"); shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
((${#harnesses[@]})) || harnesses=(checkpoint recipe idx cifar10 image text matlab metrics tensorboard quant_plan quant_export)

build=${OCTET_BUILD_DIR:-build}
fuzz=build-fuzz
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -G Ninja -DOCTET_BUILD_TESTS=OFF -DOCTET_BUILD_BENCH=OFF
cmake --build "$build" -j2 --target octet
CC=clang CXX=clang++ cmake -S tests/fuzz -B "$fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DOCTET_BUILD_DIR="$(realpath "$build")" > /dev/null
cmake --build "$fuzz" -j2

mkdir -p "$fuzz/findings"
status=0
printf '%-12s %10s %7s %6s %6s  %s\n' harness executions seconds cov ft result
for h in "${harnesses[@]}"; do
  corpus="$fuzz/corpus/$h"
  mkdir -p "$corpus"
  log="$fuzz/$h.log"
  start=$(date +%s)
  # The seeds stay read-only in tests/fuzz/corpus; what the run learns goes to build-fuzz/corpus.
  # 2 GB is far above what any valid small input needs: a bigger allocation is a finding.
  rc=0
  "$fuzz/fuzz_$h" "${limit[@]}" ${seed[@]+"${seed[@]}"} -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$fuzz/findings/$h-" "$corpus" "tests/fuzz/corpus/$h" > "$log" 2>&1 || rc=$?
  secs=$(($(date +%s) - start))
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+' || echo "?")
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+' || echo "?")
  if ((rc == 0)); then result=ok; else result="FOUND SOMETHING (see $log)"; status=1; fi
  printf '%-12s %10s %7s %6s %6s  %s\n' "$h" "$execs" "$secs" "$cov" "$ft" "$result"
  ((rc == 0)) || grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -n 5
done
exit "$status"
