#!/usr/bin/env bash
# What a 2-process `octet train` prints through mpirun: no colour escape codes in redirected output
# (a rank's output may be a pty while mpirun's goes to a file), and recipes that differ between the
# ranks name the first key that differs (the message said only that they differed).
#   bash tests/dist/launcher_output.sh <mpiexec> <octet> <recipe>
set -uo pipefail
mpiexec=$1 octet=$2 recipe=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# TERM as a terminal has it: spdlog colours only for a known terminal type.
common=(train.threads=1 data.workers=0 train.batch_size=32 log.progress=false train.max_steps=2 train.dist_timeout_s=30)
TERM=xterm-256color "$mpiexec" --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 -x TERM "$octet" train "$recipe" "${common[@]}" \
  >"$work/out.txt" 2>&1 || { cat "$work/out.txt"; echo "launcher_output: the job failed"; exit 1; }
grep -q "stopped at step 2" "$work/out.txt" || { cat "$work/out.txt"; exit 1; }
if grep -q $'\x1b\[' "$work/out.txt"; then
  echo "launcher_output: colour escape codes in redirected mpirun output:"; grep -n $'\x1b\[' "$work/out.txt" | head -3 | cat -v
  exit 1
fi
# Each rank its own learning rate (mpirun's MPMD form): an error naming the key, on every rank.
"$mpiexec" --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 \
  -np 1 "$octet" train "$recipe" "${common[@]}" optimizer.lr=0.05 log.run_name=m : \
  -np 1 "$octet" train "$recipe" "${common[@]}" optimizer.lr=0.01 log.run_name=m >"$work/mismatch.txt" 2>&1 && {
  cat "$work/mismatch.txt"; echo "launcher_output: differing recipes trained"; exit 1; }
grep -q "rank 1's recipe differs from rank 0's (after its overrides) at optimizer.lr" "$work/mismatch.txt" || {
  cat "$work/mismatch.txt"; echo "launcher_output: the differing key is not named"; exit 1; }
echo "launcher_output: ok"
