#!/usr/bin/env bash
# A signal in the middle of a 2-process `octet train`. ctest runs it in two modes:
#   kill-rank (dist_kill_rank): rank 1 is killed with SIGKILL; the job must end with a non-zero
#     status within the collective time-out.
#   term-job (dist_term_job): the job gets SIGTERM (mpirun forwards it to every rank); every rank
#     stops at the same step, rank 0 saves last.safetensors once, and the job ends.
#   int-rank (dist_int_rank): rank 1 alone gets SIGINT (Ctrl-C in its terminal); the job stops as
#     for term-job and every rank exits 130 (rank 0 exited 0, so mpirun said the job was aborted).
#   stop-rank (dist_stop_rank): rank 1 is stopped (SIGSTOP: a hung host); rank 0 times out after
#     train.dist_timeout_s, names rank 1 and its host, and the job must end then (it waited on the
#     stopped rank for minutes).
# Either way no process of the job may remain.
#   bash tests/dist/signal_job.sh <kill-rank|term-job> <mpiexec> <octet> <recipe>
set -uo pipefail
mode=$1 mpiexec=$2 octet=$3 recipe=$4
source "$(dirname "$0")/job_util.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$mpiexec" --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 -x OCTET_SIGNAL_TEST_TAG="$work" \
  "$octet" train "$recipe" train.threads=1 data.workers=0 train.batch_size=32 log.progress=false \
  train.dist_timeout_s=20 >"$work/out.txt" 2>&1 &
job=$!
# The rank-1 process of this job (its environment carries our tag and the rank).
rank1=""
for _ in $(seq 1 300); do
  rank1=$(rank_pid "$work" "$octet" 1)
  # Signal once training has started (the first metrics line is written by rank 0).
  if [ -n "$rank1" ] && ls runs/*/metrics.jsonl >/dev/null 2>&1; then break; fi
  sleep 0.1
done
if [ -z "$rank1" ]; then
  echo "signal_job: rank 1 never started"; cat "$work/out.txt"; kill -9 $job 2>/dev/null; exit 1
fi
case "$mode" in
  kill-rank) kill -9 "$rank1" ;;
  term-job) kill -TERM "$job" ;;
  int-rank) kill -INT "$rank1" ;;
  stop-rank) kill -STOP "$rank1" ;;
  *) echo "signal_job: unknown mode $mode"; exit 2 ;;
esac
start=$(date +%s)
wait $job
rc=$?
took=$(( $(date +%s) - start ))
tail -n 12 "$work/out.txt"
left=$(left_after_exit job_pids "$work" "$octet")
echo "signal_job $mode: job status $rc after $took s; processes left: ${left:-none}"
limit=60
[ "$mode" = stop-rank ] && limit=35  # the 20 s time-out, start-up of the abort, a loaded machine
[ "$rc" -ne 0 ] && [ "$took" -le $limit ] && [ -z "$left" ] || {
  for p in $(job_pids "$work" "$octet"); do kill -9 "$p"; done
  exit 1
}
if [ "$mode" = stop-rank ]; then
  # Rank 0's roll call after its time-out names the stopped rank and its host.
  grep -q "no answer within .* from rank 1 (" "$work/out.txt" || { echo "signal_job: no error names rank 1"; exit 1; }
fi
if [ "$mode" = int-rank ]; then
  # mpirun reports the ranks' common status (it prints its abort notice for any non-zero one).
  [ "$rc" -eq 130 ] || { echo "signal_job: expected status 130 from every rank, got $rc"; exit 1; }
  grep -q "by SIGINT (Ctrl-C)" "$work/out.txt" || { echo "signal_job: the stop line names no SIGINT"; exit 1; }
fi
if [ "$mode" = term-job ] || [ "$mode" = int-rank ]; then
  # One stop line (rank 0's; the others log warnings only), and its checkpoint.
  [ "$(grep -c 'stopped at step' "$work/out.txt")" -eq 1 ] || { echo "signal_job: expected one 'stopped at step'"; exit 1; }
  [ -f runs/fashion_mnist/last.safetensors ] || { echo "signal_job: no last.safetensors"; exit 1; }
  # It resumes as 2 processes to the end of the next few steps.
  step=$(sed -n 's/.*stopped at step \([0-9]*\).*/\1/p' "$work/out.txt")
  "$mpiexec" --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 "$octet" train --resume runs/fashion_mnist \
    train.max_steps=$((step + 5)) >"$work/resume.txt" 2>&1 || { cat "$work/resume.txt"; exit 1; }
  grep -q "stopped at step $((step + 5))" "$work/resume.txt" || { tail -5 "$work/resume.txt"; exit 1; }
fi
echo "signal_job $mode: ok"
