#!/usr/bin/env bash
# A rank killed with SIGKILL in the middle of a 2-process `octet train`: the job must end (a non-zero
# status) within the collective time-out, and no process of it may remain. ctest runs it as
# dist_kill_rank:  bash tests/dist/kill_rank.sh <mpiexec> <octet> <recipe>
set -uo pipefail
mpiexec=$1 octet=$2 recipe=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$mpiexec" --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 -x OCTET_KILL_TEST_TAG="$work" \
  "$octet" train "$recipe" train.threads=1 data.workers=0 train.batch_size=32 log.progress=false \
  train.dist_timeout_s=20 >"$work/out.txt" 2>&1 &
job=$!
# The rank-1 process of this job (its environment carries our tag and the rank).
rank1=""
for _ in $(seq 1 300); do
  for p in $(pgrep -f "$octet train" || true); do
    env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null || true)
    if grep -qx "OCTET_KILL_TEST_TAG=$work" <<<"$env" && grep -qx "OMPI_COMM_WORLD_RANK=1" <<<"$env"; then rank1=$p; fi
  done
  # Kill it once training has started (the first metrics line is written by rank 0).
  if [ -n "$rank1" ] && ls runs/*/metrics.jsonl >/dev/null 2>&1; then break; fi
  sleep 0.1
done
if [ -z "$rank1" ]; then
  echo "kill_rank: rank 1 never started"; cat "$work/out.txt"; kill -9 $job 2>/dev/null; exit 1
fi
kill -9 "$rank1"
start=$(date +%s)
wait $job
rc=$?
took=$(( $(date +%s) - start ))
cat "$work/out.txt" | tail -n 12
left=$(for p in $(pgrep -f "$octet train" || true); do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OCTET_KILL_TEST_TAG=$work" && echo "$p"; done)
echo "kill_rank: job status $rc after $took s; processes left: ${left:-none}"
[ "$rc" -ne 0 ] && [ "$took" -le 60 ] && [ -z "$left" ]
