#!/usr/bin/env bash
# The default recipe across hosts of their own (tests/dist/netns.sh: network namespaces on a
# bridge, mpirun's daemons started through an rsh agent, TCP only): 3 hosts x 1 process train 12
# steps with weights equal, byte for byte, to the same job as 3 processes on one host; the run then
# resumes on another layout (2 hosts: 2 processes on the first, 1 on the second) to step 16, and
# that launch, made without mpirun's keepalive options, gets rank 0's warning about them. Where
# network namespaces are refused the test says why and exits 77 (ctest: SKIPPED).
#   bash tests/dist/multihost.sh <mpiexec> <octet> <recipe>
set -uo pipefail
mpiexec=$1 octet=$2 recipe=$3
source "$(dirname "$0")/netns.sh"
work=$(mktemp -d)
cleanup() { netns_down; rm -rf "$work"; }
netns_up 3 || { echo "multihost: SKIPPED: $NETNS_WHY"; rm -rf "$work"; exit 77; }
trap cleanup EXIT
cd "$work"
args=(train.threads=1 data.workers=0 train.batch_size=48 log.progress=false train.dist_timeout_s=30
  train.max_steps=12)
fail() { tail -n 15 "$work"/*.txt; echo "multihost: $1"; exit 1; }
# Bounded: a job that hangs is killed (with every process of our hosts) and fails the test.
bounded() {
  local limit=$1
  shift
  "$@" &
  local job=$! t=0
  while kill -0 $job 2>/dev/null; do
    if [ $t -ge $((limit * 10)) ]; then
      for p in $(netns_pids); do kill -9 "$p" 2>/dev/null; done
      kill -9 $job 2>/dev/null
      return 124
    fi
    sleep 0.1
    t=$((t + 1))
  done
  wait $job
}
bounded 120 netns_mpirun 3 -np 3 --map-by node --display-map -x OMP_NUM_THREADS=1 "$octet" train "$recipe" \
  "${args[@]}" log.run_name=hosts >"$work/hosts.txt" 2>&1 || fail "the 3-host job failed (status $?)"
grep -q "x 3 processes" "$work/hosts.txt" || fail "the 3-host job did not run as 3 processes"
nodes=$(grep -o "Data for node: [^[:space:]]*" "$work/hosts.txt" | sort -u | wc -l)
[ "$nodes" -eq 3 ] || fail "the job was not mapped on 3 nodes"
bounded 120 "$mpiexec" --oversubscribe --allow-run-as-root -np 3 -x OMP_NUM_THREADS=1 "$octet" train "$recipe" \
  "${args[@]}" log.run_name=local >"$work/local.txt" 2>&1 || fail "the 1-host job failed"
for run in hosts local; do
  "$octet" export --torch "runs/$run" -o "$run.safetensors" >"$work/export_$run.txt" 2>&1 || fail "export $run"
done
cmp -s hosts.safetensors local.safetensors || fail "the 3-host weights differ from the 1-host 3-process weights"
# Resume on 2 hosts, 2 + 1 processes, launched without the keepalive options: rank 0 warns.
NETNS_KEEPALIVE=0 NETNS_SLOTS=2 bounded 120 netns_mpirun 2 -np 3 --map-by slot -x OMP_NUM_THREADS=1 "$octet" train --resume runs/hosts \
  train.max_steps=16 >"$work/resume.txt" 2>&1 || fail "the resume on 2 hosts failed"
grep -q "stopped at step 16" "$work/resume.txt" || fail "the resumed job did not reach step 16"
grep -q "oob_tcp_keepalive_time 5" "$work/resume.txt" || fail "no warning of mpirun's keepalive"
grep -q "oob_tcp_keepalive_time 5" "$work/hosts.txt" && fail "a warning of mpirun's keepalive though it is set"
echo "multihost: ok"
