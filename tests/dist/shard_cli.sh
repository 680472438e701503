#!/usr/bin/env bash
# train.shard_optimizer through the binary as the README writes it: a 2-process `octet train` with
# sharded 8-bit Adam state says the state is each process's share, its checkpoint resumes in one
# process and in two (sharded again), and `octet inspect` reads it; LAMB with its gradients clipped,
# sharded (its norms and the clip's added over the ranks), ends with the weights of the unsharded
# 2-process job, byte for byte as `octet export --torch` writes them; 4-bit AdamW likewise, and its
# sharded checkpoint resumes in one process.
#   bash tests/dist/shard_cli.sh <mpiexec> <octet> <recipe>
set -uo pipefail
mpiexec=$1 octet=$2 recipe=$3
source "$(dirname "$0")/job_util.sh"
two_process_cli "$mpiexec"
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
# `tag` trained with the arguments, sharded and not (runs <tag>true, <tag>false): the sharded log
# says so, and both export byte-identical weights.
sharded_equals_unsharded() {
  local tag=$1 shard
  shift
  for shard in true false; do
    "${mpi[@]}" "$octet" train "$recipe" "${common[@]}" "$@" train.shard_optimizer=$shard log.run_name=$tag$shard \
      >"$work/${tag}_$shard.txt" 2>&1 || fail "$tag with train.shard_optimizer=$shard failed"
    "$octet" export --torch runs/$tag$shard -o "$tag$shard.safetensors" >"$work/export_${tag}_$shard.txt" 2>&1 ||
      fail "$tag: export failed"
  done
  grep -q "(sharded)" "$work/${tag}_true.txt" || fail "the $tag log does not say the state is sharded"
  cmp -s "${tag}true.safetensors" "${tag}false.safetensors" || fail "sharded $tag's weights differ from unsharded"
}
sharded_equals_unsharded lamb optimizer.name=lamb optimizer.weight_decay=0.01 train.clip_grad_norm=0.5 train.max_steps=4
# 4-bit AdamW (the convolutions' second moments rank-1, their maxima max-reduced over the ranks),
# and its sharded checkpoint resumed in one process.
sharded_equals_unsharded four optimizer.name=adamw optimizer.state_bits=4 train.max_steps=3
"$octet" train --resume runs/fourtrue train.max_steps=4 >"$work/resume4.txt" 2>&1 ||
  fail "one process did not resume the sharded 4-bit checkpoint"
echo "shard_cli: ok"
