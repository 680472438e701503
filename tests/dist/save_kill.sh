#!/usr/bin/env bash
# A rank killed (SIGKILL) while a 2-process job with sharded optimizer state saves: the state is
# gathered from both ranks and rank 0 writes it, so either rank's death can land inside a save.
# Round after round the job (resumed from what the last round left) loses rank 1, then rank 0, the
# moment rank 0 starts writing a checkpoint (its temporary file appears), after a first save and a
# random pause: each time the job ends with an error within the time-out,
# no process is left, last.safetensors is whole (`octet inspect` reads it, its step never goes
# back), and the next round resumes from it. The 3.6M-parameter MLP's checkpoint (43 MB, with its
# Adam state) takes a good part of each 0.3 s epoch to gather and write.
#   bash tests/dist/save_kill.sh <mpiexec> <octet> <recipe>
set -uo pipefail
mpiexec=$1 octet=$2 recipe=$3
source "$(dirname "$0")/job_util.sh"
work=$(mktemp -d)
trap 'for p in $(job_pids "$work" "$octet"); do kill -9 "$p"; done; rm -rf "$work"' EXIT
cd "$work"
mpi=("$mpiexec" --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 -x OCTET_SIGNAL_TEST_TAG="$work")
args=(train.threads=1 data.workers=0 train.batch_size=32 log.progress=false train.dist_timeout_s=20
  model.name=mlp "model.hidden_sizes=[1536,1536]" optimizer.name=adam optimizer.lr=0.001 optimizer.momentum=0
  train.shard_optimizer=true data.limit_train=96 data.limit_test=64 train.epochs=100000 log.run_name=z)
ckpt=runs/z/last.safetensors
fail() { tail -n 20 "$work"/*.txt; echo "save_kill: $1"; exit 1; }
step_of() { "$octet" inspect "$ckpt" 2>/dev/null | sed -n 's/^  step: \([0-9]*\)$/\1/p'; }
stamp() { date -r "$ckpt" +%s%N 2>/dev/null; }
last_step=0 inside=0
for round in 1 2 3 4 5 6; do
  victim=$((round % 2))  # rank 1, rank 0, ...
  before=$(stamp)
  if [ "$round" -eq 1 ]; then
    "${mpi[@]}" "$octet" train "$recipe" "${args[@]}" >"$work/round$round.txt" 2>&1 &
  else
    "${mpi[@]}" "$octet" train --resume runs/z >"$work/round$round.txt" 2>&1 &
  fi
  job=$!
  # Once this round has saved (the checkpoint changed), kill the victim a random moment later.
  for _ in $(seq 1 600); do
    [ "$(stamp)" != "$before" ] && break
    sleep 0.05
  done
  [ "$(stamp)" != "$before" ] || fail "round $round never saved"
  sleep "0.$((RANDOM % 300 + 100))"
  pid=$(rank_pid "$work" "$octet" "$victim")
  [ -n "$pid" ] || fail "round $round: rank $victim is not running"
  # Aim at a save: kill the moment rank 0's next write appears (its temporary file), or after 5 s.
  writing=0
  for _ in $(seq 1 5000); do
    if compgen -G "runs/z/.*.tmp.*" >/dev/null; then
      writing=1
      break
    fi
    sleep 0.001
  done
  kill -9 "$pid"
  inside=$((inside + writing))
  start=$(date +%s)
  wait $job
  rc=$? took=$(($(date +%s) - start))
  left=$(left_after_exit job_pids "$work" "$octet")
  [ "$rc" -ne 0 ] || fail "round $round: the job exited 0 after rank $victim was killed"
  [ "$took" -le 60 ] || fail "round $round: the job took $took s to end"
  [ -z "$left" ] || fail "round $round: processes left: $left"
  step=$(step_of)
  [ -n "$step" ] || fail "round $round: $ckpt does not load after rank $victim was killed"
  [ "$step" -ge "$last_step" ] || fail "round $round: the checkpoint went back from step $last_step to $step"
  # A write cut short leaves its temporary file (the next save removes it).
  cut=$(find runs/z -name '.*.tmp.*' | wc -l)
  echo "save_kill: round $round, rank $victim killed (during a write: $writing); job status $rc after $took s;" \
    "checkpoint at step $step; writes cut short: $cut"
  last_step=$step
done
# The survivor resumes and finishes a few more steps (exit 0), and its first save is whole.
"${mpi[@]}" "$octet" train --resume runs/z train.max_steps=$((last_step + 4)) >"$work/final.txt" 2>&1 ||
  fail "the last checkpoint did not resume"
[ "$(step_of)" -eq $((last_step + 4)) ] || fail "the resumed job did not save step $((last_step + 4))"
echo "save_kill: ok ($inside of 6 kills during a write)"
