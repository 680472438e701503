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
