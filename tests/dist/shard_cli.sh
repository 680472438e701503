#!/usr/bin/env bash
# train.shard_optimizer through the binary as the README writes it: a 2-process `octet train` with
# sharded 8-bit Adam state says the state is each process's share, its checkpoint resumes in one
# process and in two (sharded again), `octet inspect` reads it, and an optimizer that cannot shard
# (lamb) is an error naming the key (exit 2).
#   bash tests/dist/shard_cli.sh <mpiexec> <octet> <recipe>
set -uo pipefail
mpiexec=$1 octet=$2 recipe=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mpi=("$mpiexec" --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1)
common=(train.threads=1 data.workers=0 train.batch_size=32 log.progress=false train.dist_timeout_s=30
  optimizer.name=adam optimizer.lr=0.001 optimizer.state_bits=8 optimizer.min_8bit_size=0 log.run_name=z)
fail() { cat "$work"/*.txt; echo "shard_cli: $1"; exit 1; }
"${mpi[@]}" "$octet" train "$recipe" "${common[@]}" train.shard_optimizer=true train.max_steps=3 >"$work/train.txt" 2>&1 ||
  fail "the sharded job failed"
grep -q "of state on this process (sharded)" "$work/train.txt" || fail "the log does not say the state is sharded"
cp -r runs/z runs_copy
"$octet" train --resume runs/z train.max_steps=5 >"$work/resume1.txt" 2>&1 || fail "one process did not resume"
grep -q "resuming run" "$work/resume1.txt" || fail "no resume line"
"${mpi[@]}" "$octet" train --resume runs_copy train.max_steps=5 >"$work/resume2.txt" 2>&1 ||
  fail "two processes did not resume the sharded checkpoint"
"$octet" inspect runs/z >"$work/inspect.txt" 2>&1 || fail "inspect failed"
"${mpi[@]}" "$octet" train "$recipe" "${common[@]}" train.shard_optimizer=true optimizer.name=lamb log.run_name=l \
  train.max_steps=1 >"$work/lamb.txt" 2>&1
status=$?
[ "$status" -ne 0 ] || fail "lamb with train.shard_optimizer trained"
grep -q "train.shard_optimizer" "$work/lamb.txt" || fail "the lamb error does not name the key"
echo "shard_cli: ok"
