#!/usr/bin/env bash
# `mpirun -np 2 octet train --resume RUN` through the binary, as the README writes it: a 2-process
# GPT job with INT8 Linear layers, bf16 mixed precision and sharded 4-bit AdamW state, stopped at
# step 6 and resumed to step 12, ends with the uninterrupted job's weights, byte for byte as
# `octet export --torch` writes them. Each rank keeps its own DSGC gradient clips between two
# searches (its own shard of the batch): the checkpoint holds one per rank, and each rank resumes
# with its own (before, every rank resumed with rank 0's and the weights parted at step 7).
#   bash tests/dist/resume_cli.sh <mpiexec> <octet> <recipe>
set -uo pipefail
mpiexec=$1 octet=$2 recipe=$3
source "$(dirname "$0")/job_util.sh"
two_process_cli "$mpiexec"
common=(train.threads=1 log.progress=false train.dist_timeout_s=60 quant.int8_linear=true train.precision=bf16
  optimizer.state_bits=4 train.shard_optimizer=true)
fail() { cat "$work"/*.txt; echo "resume_cli: $1"; exit 1; }
"${mpi[@]}" "$octet" train "$recipe" "${common[@]}" train.max_steps=12 log.run_name=whole >"$work/whole.txt" 2>&1 ||
  fail "the uninterrupted job failed"
"${mpi[@]}" "$octet" train "$recipe" "${common[@]}" train.max_steps=6 log.run_name=split >"$work/first.txt" 2>&1 ||
  fail "the job stopped at step 6 failed"
"$octet" inspect runs/split >"$work/inspect.txt" 2>&1 || fail "inspect failed"
grep -Eq "\.grad_clip +f32 +\[2\]" "$work/inspect.txt" || fail "the checkpoint does not hold each rank's gradient clip"
"${mpi[@]}" "$octet" train --resume runs/split train.max_steps=12 >"$work/second.txt" 2>&1 ||
  fail "two processes did not resume"
grep -q "resuming run" "$work/second.txt" || fail "no resume line"
for run in whole split; do
  "$octet" export --torch runs/$run -o $run.safetensors >"$work/export_$run.txt" 2>&1 || fail "export of $run failed"
done
cmp -s whole.safetensors split.safetensors || fail "the resumed job's weights differ from the uninterrupted job's"
echo "resume_cli: ok"
