# Shared by the shell tests of multi-process jobs (sourced).
# rank_pid TAG OCTET RANK: the pid of the `OCTET train` process of rank RANK whose environment
# carries OCTET_SIGNAL_TEST_TAG=TAG (the job's mpirun passes it with -x); empty when none yet.
rank_pid() {
  local tag=$1 octet=$2 rank=$3 p env
  for p in $(pgrep -f "$octet train" || true); do
    env=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null || true)
    if grep -qx "OCTET_SIGNAL_TEST_TAG=$tag" <<<"$env" && grep -qx "OMPI_COMM_WORLD_RANK=$rank" <<<"$env"; then
      echo "$p"
      return
    fi
  done
}
# job_pids TAG OCTET: every process of the job still running.
job_pids() {
  local tag=$1 octet=$2 p
  for p in $(pgrep -f "$octet train" || true); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OCTET_SIGNAL_TEST_TAG=$tag" && echo "$p"
  done
}
# left_after_exit CMD...: what CMD (a process lister: job_pids TAG OCTET, netns_pids) still lists
# once the job's processes have had up to 10 s to be gone, each with its state and command; empty
# when none is left. mpirun returns as soon as it has signalled its ranks, without reaping them
# (traced: it was gone while both ranks were still zombies), so a rank that is still unwinding its
# threads after the SIGKILL is listed for a moment on a loaded machine (CI saw one, once). A
# process listed after 10 s is one the job left behind.
left_after_exit() {
  local left p
  for _ in $(seq 1 100); do
    left=$("$@")
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  for p in $left; do
    echo "$p $(awk '{print "state " $3}' "/proc/$p/stat" 2>/dev/null) $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-120)"
  done
}
# two_process_cli MPIEXEC: for a script that runs `octet` as a 2-process job: a temporary folder,
# $work, made the current one and removed at exit, and the job's launcher in the array $mpi (one
# thread per process).
two_process_cli() {
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cd "$work" || exit 1
  mpi=("$1" --oversubscribe --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1)
}
