#!/usr/bin/env bash
# One fault in a 3-host job (tests/dist/netns.sh: one process on each of 3 network-namespace
# hosts, TCP only, train.dist_timeout_s=10), after its first checkpoint:
#   kill-host  every process of host 3 (its rank and mpirun's daemon) SIGKILLed mid-step
#   cut-link   host 3's link down (ip link set ... down) mid-all-reduce
#   loss       host 3's link drops every frame (its bridge port disabled, the link up: as 100% loss
#              or a switch port shut)
#   slow       host 3's link limited to 20 Mbit/s (tc tbf), under the time-out: the job must
#              finish, with the weights of the same job on full-speed links, byte for byte
#   preempt    SIGTERM to every rank, SIGKILL to what is left 30 s later (a scheduler's pre-emption):
#              every rank stops at one step, rank 0's checkpoint is whole
#   no-start   rank 2 fails to start (its command exits 3 before octet runs)
# In each failing case the job must end (mpirun included) within the time-out plus 15 s, with no
# process left on any host and an error naming the silent rank and its host (octet's, or mpirun's
# when it loses the host's daemon first);
# then the last checkpoint loads and the job resumes on the 3 hosts. A line of RESULTS.md's fault
# table is printed. Exit 77 (ctest: SKIPPED) where network namespaces are refused.
#   bash tests/dist/faults.sh <mode> <octet> <recipe>
set -uo pipefail
mode=$1 octet=$2 recipe=$3
source "$(dirname "$0")/netns.sh"
source "$(dirname "$0")/job_util.sh"
work=$(mktemp -d)
netns_up 3 || { echo "faults: SKIPPED: $NETNS_WHY"; rm -rf "$work"; exit 77; }
trap 'netns_down; rm -rf "$work"' EXIT
cd "$work"
timeout_s=10
args=(train.threads=1 data.workers=0 train.batch_size=48 log.progress=false "train.dist_timeout_s=$timeout_s"
  data.limit_train=480 data.limit_test=96)
fail() { tail -n 25 "$work"/*.txt; echo "faults $mode: $1"; exit 1; }
ckpt_step() { "$octet" inspect "$1" 2>/dev/null | sed -n 's/^  step: \([0-9]*\)$/\1/p'; }
# A job on the 3 hosts in the background; $job is mpirun's pid.
launch() {
  local out=$1
  shift
  netns_mpirun 3 -np 3 --map-by node -x OMP_NUM_THREADS=1 "$@" >"$out" 2>&1 &
  job=$!
}
# Waits for $job at most $1 s; sets rc (124: it had to be killed) and took.
finish_within() {
  local limit=$1 start t=0
  start=$(date +%s%N)
  while kill -0 "$job" 2>/dev/null && [ $t -lt $((limit * 10)) ]; do
    sleep 0.1
    t=$((t + 1))
  done
  if kill -0 "$job" 2>/dev/null; then
    for p in $(netns_pids); do kill -9 "$p" 2>/dev/null; done
    wait "$job"
    rc=124
  else
    wait "$job"
    rc=$?
  fi
  local tenths=$((($(date +%s%N) - start) / 100000000))
  took="$((tenths / 10)).$((tenths % 10))"
}
wait_for_checkpoint() {
  for _ in $(seq 1 600); do
    [ -f runs/job/last.safetensors ] && return 0
    kill -0 "$job" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

if [ "$mode" = slow ]; then
  # The same 12 steps on a full-speed and a slow link: equal weights.
  for run in plain slow; do
    if [ $run = slow ]; then netns_slow 3 20mbit || fail "tc tbf failed"; fi
    launch "$work/$run.txt" "$octet" train "$recipe" "${args[@]}" train.max_steps=12 log.run_name=$run
    finish_within 120
    [ "$rc" -eq 0 ] || fail "the $run job ended with status $rc"
    "$octet" export --torch runs/$run -o $run.safetensors >/dev/null 2>&1 || fail "export $run"
    echo "faults slow: the $run job took $took s"
  done
  cmp -s plain.safetensors slow.safetensors || fail "the slow link's weights differ"
  echo "faults | slow | host 3's link at 20 Mbit/s | finished in $took s | weights equal to the full-speed job's |"
  echo "faults slow: ok"
  exit 0
fi

run_args=(train "$recipe" "${args[@]}" train.epochs=1000 log.run_name=job)
if [ "$mode" = no-start ]; then
  launch "$work/job.txt" bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 2 ]; then exit 3; fi; exec "$@"' rank "$octet" \
    "${run_args[@]}"
  finish_within $((timeout_s + 15))
  left=$(left_after_exit netns_pids)
  [ -z "$left" ] || fail "processes left: $left"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "the job ended with status $rc"
  echo "faults | no-start | rank 2 exits 3 before it starts | job ended in $took s, status $rc | nothing to keep |"
  echo "faults no-start: ok"
  exit 0
fi

launch "$work/job.txt" "$octet" "${run_args[@]}"
wait_for_checkpoint || fail "the job saved no checkpoint"
sleep 0.5
case "$mode" in
  kill-host) for p in $(ip netns pids "$(netns_name 3)"); do kill -9 "$p"; done ;;
  cut-link) netns_cut 3 ;;
  loss) netns_block 3 ;;
  preempt)
    pids=$(for p in $(netns_pids); do tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -q OMPI_COMM_WORLD_RANK && echo "$p"; done)
    kill -TERM $pids
    (
      sleep 30
      kill -9 $pids
    ) >/dev/null 2>&1 &
    reaper=$!
    ;;
  *) echo "faults: unknown mode $mode"; exit 2 ;;
esac
finish_within $((timeout_s + 15))
ended=$took ended_rc=$rc
if [ -n "${reaper:-}" ]; then  # the pre-emption's SIGKILL: nothing is left for it to end
  pkill -P "$reaper" sleep
  kill "$reaper" 2>/dev/null
fi
left=$(left_after_exit netns_pids)
[ -z "$left" ] || { for p in $(netns_pids); do kill -9 "$p"; done; fail "processes left: $left"; }
netns_restore 3
sleep 1  # a link brought back up takes a moment to carry
[ "$rc" -ne 124 ] || fail "the job did not end within $((timeout_s + 15)) s"
if [ "$mode" = preempt ]; then
  [ "$(grep -c 'stopped at step' "$work/job.txt")" -eq 1 ] || fail "expected one 'stopped at step' line"
  kept="rank 0's SIGTERM checkpoint, whole"
else
  [ "$rc" -ne 0 ] || fail "the job exited 0"
  # Named by octet's roll call after its time-out, or by mpirun when its keepalive finds the daemon
  # of host 3 gone first (netns_mpirun: within 6-11 s), whichever ends the job.
  grep -q -e "rank 2 (host3)" -e "on node $(netns_addr 3)\$" "$work/job.txt" || fail "no error names rank 2 or host 3"
  kept="the last epoch's checkpoint, whole"
fi
# What the user sees: the ranks' errors (and mpirun's first line about the host).
grep -E "^octet train: rank|lost communication|Remote daemon" "$work/job.txt" | head -n 6 | sed 's/^/  | /'
step=$(ckpt_step runs/job/last.safetensors)
[ -n "$step" ] || fail "last.safetensors does not load"
# It resumes on the same 3 hosts for 3 more steps.
launch "$work/resume.txt" "$octet" train --resume runs/job train.max_steps=$((step + 3))
finish_within 120
[ "$rc" -eq 0 ] || fail "the resume ended with status $rc"
[ "$(ckpt_step runs/job/last.safetensors)" -eq $((step + 3)) ] || fail "the resume did not save step $((step + 3))"
echo "faults | $mode | job ended in $ended s, status $ended_rc | $kept (step $step), resumed |"
echo "faults $mode: ok"
