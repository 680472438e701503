#!/usr/bin/env bash
# gpu_check.sh: one command that checks octet's CUDA backend on a machine with a GPU and writes
# one markdown report (device, driver, CUDA/cuDNN versions, commit, pass/fail of every CUDA test,
# the GPU benchmarks' output, total time). Exits non-zero on any failure; a test SKIPPED on a GPU
# machine is a failure too (the device was not usable), unless its skip message says it is a test
# for machines without a GPU ("... has a GPU", "... device is present"). Aims at < 10 min on an H100.
#
#   tools/scripts/gpu_check.sh pack DIR
#     Runs on a machine with octet's dependencies (tools/scripts/setup.sh) and the CUDA toolkit; no GPU
#     needed. Configures and builds build-gpu/ (Release, -DOCTET_CUDA=ON, -DOCTET_WERROR=ON,
#     CMAKE_CUDA_ARCHITECTURES=${OCTET_CUDA_ARCH:-90}) and copies into DIR: bin/octet_tests,
#     bin/octet, bin/<GPU benchmark programs>, bench/<GPU benchmark scripts>, lib/liboctet.so.0 and
#     every shared library they load that is neither part of a base system (glibc, libstdc++,
#     libgcc_s) nor of the CUDA toolkit or driver (libcuda, cudart, cuBLAS, cuDNN, nvrtc, ...: the
#     GPU machine brings those), stripped, in one DIR/payload.tar.gz (about 16 MB: libdnnl alone
#     is 40 MB unpacked). DIR/MANIFEST.txt names the commit, the build and every file; this script
#     is copied to DIR/gpu_check.sh.
#
#   tools/scripts/gpu_check.sh run [DIR|-] [REPORT]
#     Runs on the GPU machine. With DIR (a pack) it unpacks the payload to a temporary folder and
#     runs its binaries with LD_LIBRARY_PATH set to its lib/ plus the folders holding the CUDA
#     libraries they need, found by soname under /usr/local/cuda*, the driver's folders,
#     ldconfig's cache and python3's nvidia-* wheels (where PyTorch's cuBLAS and cuDNN live).
#     Without DIR (or with "-") it configures and builds
#     build-gpu/ from this checkout (the machine then needs octet's dependencies; the CUDA
#     architecture defaults to "native"). REPORT defaults to gpu_report.md. Steps: nvidia-smi,
#     `octet selftest`, octet_tests --gtest_filter="${GTEST_FILTER:-*Cuda*}" with XML output (one
#     row per test in the report), each GPU benchmark, the report.
#
# GPU benchmarks, by convention: a program tools/bench/bench_NAME.cpp (built as octet_bench_NAME)
# or a script tools/bench/bench_NAME.py whose source contains the string "--device" takes
# `--device cuda`. Each runs with `--device cuda` plus BENCH_ARGS[its name] (below; keep each
# under ~3 minutes on an H100), under a timeout of BENCH_TIMEOUT seconds (default 240). Benchmarks
# that are subcommands of the octet CLI (`octet bench pbatch`) are listed in CLI_BENCHES.
#
# With the device tool (in a session whose task is lent a GPU machine):
#   1. here:   tools/scripts/gpu_check.sh pack /work/main/build-gpu-pack
#              (build-*/ is git-ignored; the pack must lie in the checkout the session started in,
#              because the device tool sends that checkout, whichever worktree a helper calls from)
#   2. device: run(command="bash build-gpu-pack/gpu_check.sh run build-gpu-pack $OUT/gpu_report.md",
#                  carry=["build-gpu-pack"], timeout_s=600)
#   3. the report comes back under the reply's files_at: copy the device, driver, test summary and
#      benchmark table into tools/bench/RESULTS.md and commit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_TIMEOUT=${BENCH_TIMEOUT:-240}
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
FILTER=${GTEST_FILTER:-*Cuda*}

# Extra arguments per GPU benchmark (by program or script name, without extension); {bench} is
# replaced by the folder holding the benchmark scripts. "-" means: not on its own (another
# benchmark runs it, as octet_bench_train runs its PyTorch companion for a side-by-side table).
declare -A BENCH_ARGS=(
  [octet_bench_train]="--torch-script {bench}/bench_train_torch.py"
  [bench_train_torch]="-"
  [octet_bench_int8]="--reps 5 --batch 32"
)
# GPU benchmarks that are subcommands of the octet CLI: report name -> arguments.
declare -A CLI_BENCHES=(
  [octet_bench_pbatch]="bench pbatch --device cuda --sizes 512,1024,2048,4096,8192"
)

# Libraries the GPU machine provides: the base system and the CUDA toolkit/driver.
SYSTEM_LIBS='^(linux-vdso|linux-gate|ld-linux|libc\.so|libm\.so|libmvec|libstdc\+\+|libgcc_s|libpthread|libdl\.so|librt\.so|libresolv|libutil\.so)'
CUDA_LIBS='^(libcuda\.so|libcudart|libcublas|libcublasLt|libcudnn|libnvrtc|libnvJitLink|libnvToolsExt|libnvtx|libcufft|libcurand|libcusparse|libcusolver|libnccl|libnvidia-)'

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
  exit 2
}

log() { printf '[gpu_check] %s\n' "$*" >&2; }

# Names (bench_NAME.cpp / bench_NAME.py) of the benchmark sources that take --device.
gpu_bench_sources() {
  local f
  for f in "$ROOT"/tools/bench/bench_*.cpp "$ROOT"/tools/bench/bench_*.py; do
    [[ -f $f ]] && grep -q -- '--device' "$f" && basename "$f"
  done
  return 0
}

configure_and_build() {  # build_dir cuda_arch
  local build=$1 arch=$2 gen=() b targets=(octet_tests octet_cli)
  command -v ninja > /dev/null && gen=(-G Ninja)
  for b in $(gpu_bench_sources); do [[ $b == *.cpp ]] && targets+=("octet_${b%.cpp}"); done
  log "configuring $build (CUDA architectures $arch)"
  mkdir -p "$build"
  cmake -S "$ROOT" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DOCTET_CUDA=ON -DOCTET_WERROR=ON \
    -DOCTET_BUILD_TESTS=ON -DOCTET_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" > "$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; return 1; }
  log "building ${targets[*]}"
  cmake --build "$build" --target "${targets[@]}" -j "${JOBS:-$(nproc)}"
}

# ---------------------------------------------------------------- pack

pack() {
  local dir=${1:-}
  [[ -n $dir ]] || usage
  [[ $(uname -m) == x86_64 ]] || log "warning: packing on $(uname -m); the GPU machines are x86-64"
  local build=${BUILD_DIR:-$ROOT/build-gpu}
  configure_and_build "$build" "${OCTET_CUDA_ARCH:-90}"

  rm -rf "$dir"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local stage
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib" "$stage/bench"
  cp "$build/tests/octet_tests" "$build/octet" "$stage/bin/"
  local b
  for b in $(gpu_bench_sources); do
    if [[ $b == *.cpp ]]; then
      cp "$build/tools/bench/octet_${b%.cpp}" "$stage/bin/"
    else
      cp "$ROOT/tools/bench/$b" "$stage/bench/"
    fi
  done
  # liboctet under its soname (what the binaries ask for), as a plain file.
  local soname
  soname=$(objdump -p "$build/liboctet.so" | awk '/SONAME/{print $2}')
  cp -L "$build/liboctet.so" "$stage/lib/$soname"

  # Every library the binaries and liboctet load (ldd lists the transitive closure), minus the
  # base system and CUDA. A library that is not found here is an error: the pack would not run.
  local name path
  while read -r name path; do
    [[ $name =~ $SYSTEM_LIBS || $name =~ $CUDA_LIBS || $name == "$soname" ]] && continue
    [[ $path == "not" ]] && { log "error: $name is not found on this machine"; return 1; }
    [[ -e $stage/lib/$name ]] || cp -L "$path" "$stage/lib/$name"
  done < <(ldd "$stage"/bin/* "$stage/lib/$soname" | awk '/=>/{print $1, $3}' | sort -u)
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/* 2> /dev/null || log "warning: strip failed on some files"
  # One gzip tarball: libdnnl alone is ~40 MB, ~11 MB compressed.
  tar -C "$stage" -czf "$dir/payload.tar.gz" bin lib bench
  cp "${BASH_SOURCE[0]}" "$dir/gpu_check.sh"
  chmod +x "$dir/gpu_check.sh"

  {
    echo "octet GPU check pack: payload.tar.gz holds bin/, lib/ and bench/; run it with gpu_check.sh run DIR"
    echo "commit: $(git -C "$ROOT" rev-parse HEAD 2> /dev/null || echo unknown)" \
      "($(git -C "$ROOT" status --porcelain 2> /dev/null | wc -l) uncommitted changes)"
    echo "subject: $(git -C "$ROOT" log -1 --format=%s 2> /dev/null || echo unknown)"
    echo "packed: $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
    echo "build: Release, CUDA architectures ${OCTET_CUDA_ARCH:-90}, $(nvcc --version 2> /dev/null | grep -o 'release [0-9.]*' || echo 'nvcc unknown'), $(c++ --version | head -1)"
    echo "benchmarks: $(gpu_bench_sources | tr '\n' ' ')"
    echo "files (bytes, uncompressed):"
    (cd "$stage" && find . -type f -printf '  %P %s\n' | sort)
  } > "$dir/MANIFEST.txt"
  rm -rf "$stage"
  local size
  size=$(du -sb "$dir" | cut -f1)
  log "pack in $dir: $((size / 1024 / 1024)) MiB"
  ((size < 60 * 1024 * 1024)) || { log "error: the pack is over 60 MiB (the device tool carries 64 MiB in all)"; return 1; }
}

# ---------------------------------------------------------------- run

# Folders that may hold CUDA libraries on this machine, most specific first.
cuda_lib_candidates() {
  local d sp
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib /usr/local/cuda-*/lib64 \
    /usr/local/cuda-*/targets/x86_64-linux/lib /usr/local/cuda-*/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib \
    /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib; do
    [[ -d $d ]] && echo "$d"
  done
  # PyTorch's wheels: site-packages/nvidia/<pkg>/lib (cu12) or nvidia/cu13/lib (cu13).
  if command -v python3 > /dev/null; then
    for sp in $(python3 -c 'import site, sys; print("\n".join(dict.fromkeys(site.getsitepackages() + [p for p in sys.path if p.endswith("-packages")])))' 2> /dev/null); do
      [[ -d $sp/nvidia ]] && find "$sp/nvidia" -maxdepth 3 -type d -name lib 2> /dev/null
    done
  fi
  return 0
}

# Adds to LD_LIBRARY_PATH the folder of each library the pack's files cannot find, plus those
# loaded with dlopen (the driver by cudart, nvrtc by cuDNN's runtime-compiled engines).
setup_library_path() {  # pack_dir
  local dir=$1 so c found missing candidates
  export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  mapfile -t candidates < <(cuda_lib_candidates)
  # ldd fails on scripts and tolerates nothing else: its output is what counts.
  missing=$(ldd "$dir"/bin/* "$dir"/lib/* 2> /dev/null | awk '/not found/{print $1}' | sort -u || true)
  for so in $missing libcuda.so.1 libnvrtc.so.13 libnvrtc.so.12; do
    [[ $so == libcuda.so.1 || $so == libnvrtc* ]] && ldconfig -p 2> /dev/null | grep -q "$so " && continue
    found=""
    for c in "${candidates[@]}"; do
      if [[ -e $c/$so ]]; then
        found=$c
        break
      fi
    done
    if [[ -n $found ]]; then
      [[ :$LD_LIBRARY_PATH: == *":$found:"* ]] || LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$found"
    fi
  done
  missing=$(ldd "$dir"/bin/* "$dir"/lib/* 2> /dev/null | awk '/not found/{print $1}' | sort -u | tr '\n' ' ' || true)
  [[ -z $missing ]] || { log "error: libraries not found on this machine: $missing"; return 1; }
  log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
}

run() {
  local dir=${1:--} report=${2:-gpu_report.md}
  local t0 work bin bench_dir commit how
  t0=$(date +%s)
  work=$(mktemp -d)
  command -v python3 > /dev/null || { log "error: python3 is needed to write the report"; return 1; }

  if [[ $dir == - ]]; then
    local build=${BUILD_DIR:-$ROOT/build-gpu}
    configure_and_build "$build" "${OCTET_CUDA_ARCH:-native}"
    bin=$work/bin
    mkdir -p "$bin"
    ln -s "$build/tests/octet_tests" "$build/octet" "$bin/"
    for b in "$build"/tools/bench/octet_bench_*; do
      [[ -x $b ]] && gpu_bench_sources | grep -qx "${b##*/octet_}.cpp" && ln -s "$b" "$bin/"
    done
    bench_dir=$ROOT/tools/bench
    commit="$(git -C "$ROOT" rev-parse HEAD 2> /dev/null || echo unknown) ($(git -C "$ROOT" status --porcelain 2> /dev/null | wc -l) uncommitted changes)"
    how="built from source in $build"
  else
    [[ -f $dir/payload.tar.gz ]] || { log "error: $dir is not a pack (no payload.tar.gz); make one with: $0 pack DIR"; return 1; }
    dir=$(cd "$dir" && pwd)
    mkdir -p "$work/pack"
    tar -C "$work/pack" -xzf "$dir/payload.tar.gz"
    setup_library_path "$work/pack"
    bin=$work/pack/bin
    bench_dir=$work/pack/bench
    commit=$(sed -n 's/^commit: //p' "$dir/MANIFEST.txt")
    how="pack $(sed -n 's/^packed: //p' "$dir/MANIFEST.txt"); $(sed -n 's/^build: //p' "$dir/MANIFEST.txt")"
  fi

  log "device"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader > "$work/smi.txt" \
    2> /dev/null || rm -f "$work/smi.txt"
  (nvcc --version 2> /dev/null | grep -o 'release [0-9.]*' || echo "no nvcc") > "$work/nvcc.txt"

  log "octet selftest"
  local rc=0
  timeout 120 "$bin/octet" selftest > "$work/selftest.log" 2>&1 || rc=$?
  echo "$rc" > "$work/selftest.rc"

  log "CUDA tests ($FILTER)"
  rc=0
  timeout "$TEST_TIMEOUT" "$bin/octet_tests" --gtest_filter="$FILTER" --gtest_output="xml:$work/tests.xml" \
    > "$work/tests.log" 2>&1 || rc=$?
  echo "$rc" > "$work/tests.rc"
  tail -3 "$work/tests.log" >&2

  mkdir -p "$work/bench"
  # bench NAME CMD...: runs one benchmark, keeping its command, output, status and seconds.
  bench() {
    local name=$1 t1 rc=0
    shift
    log "benchmark $name"
    printf '%s ' "$@" | sed "s|$bin/||; s|$bench_dir/||" > "$work/bench/$name.cmd"
    t1=$(date +%s)
    timeout "$BENCH_TIMEOUT" "$@" > "$work/bench/$name.log" 2>&1 || rc=$?
    echo "$rc $(($(date +%s) - t1))" > "$work/bench/$name.rc"
  }
  local exe name
  for exe in "$bin"/octet_bench_* "$bench_dir"/bench_*.py; do
    [[ -e $exe ]] || continue
    name=$(basename "$exe" .py)
    [[ $exe == *.py ]] && ! grep -q -- '--device' "$exe" && continue
    local extra=${BENCH_ARGS[$name]:-}
    [[ $extra == - ]] && continue
    local cmd=("$exe")
    [[ $exe == *.py ]] && cmd=(python3 "$exe")
    # shellcheck disable=SC2206  # the extra arguments are words
    cmd+=(--device cuda ${extra//\{bench\}/$bench_dir})
    bench "$name" "${cmd[@]}"
  done
  for name in "${!CLI_BENCHES[@]}"; do
    # shellcheck disable=SC2206  # the arguments are words
    local args=(${CLI_BENCHES[$name]})
    bench "$name" "$bin/octet" "${args[@]}"
  done

  echo "$commit" > "$work/commit.txt"
  echo "$how" > "$work/how.txt"
  echo "$(($(date +%s) - t0))" > "$work/seconds.txt"
  rc=0
  python3 - "$work" "$report" "$FILTER" << 'PY' || rc=$?
import os, re, sys, xml.etree.ElementTree as ET

work, report, flt = sys.argv[1:4]
def read(name, default=""):
    p = os.path.join(work, name)
    return open(p, errors="replace").read().strip() if os.path.exists(p) else default

problems = []
tests, props = [], {}
xml_path = os.path.join(work, "tests.xml")
if os.path.exists(xml_path):
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        name = f'{case.get("classname")}.{case.get("name")}'
        for p in case.iter("property"):
            props[p.get("name")] = p.get("value")
        for k in ("device_name", "driver_cuda_version", "cudnn_version"):
            if case.get(k): props[k] = case.get(k)
        failures = [f.get("message", "") for f in case.iter("failure")]
        skipped = case.get("result") == "skipped" or case.find("skipped") is not None
        why = failures[0] if failures else (case.find("skipped").get("message", "") if case.find("skipped") is not None else "")
        status = "FAIL" if failures else ("SKIP" if skipped or case.get("status") == "notrun" else "PASS")
        # Tests for machines without a GPU skip here, saying so: those skips are expected.
        if status == "SKIP" and re.search(r"has a GPU|GPU is present|device is present", why, re.I):
            status = "SKIP (no-GPU test)"
        tests.append((name, status, float(case.get("time", "0")), why))
else:
    problems.append("the test binary wrote no XML (it crashed or timed out): see the log below")
tests_rc = int(read("tests.rc", "1"))
n = {s: sum(1 for t in tests if t[1] == s) for s in ("PASS", "FAIL", "SKIP", "SKIP (no-GPU test)")}
if not tests: problems.append(f"no test matched the filter {flt}")
if n["FAIL"]: problems.append(f'{n["FAIL"]} test(s) failed')
if n["SKIP"]: problems.append(f'{n["SKIP"]} test(s) skipped on a GPU machine (the device was not usable)')
if tests_rc == 124: problems.append("the tests timed out")
elif tests_rc != 0 and not n["FAIL"]: problems.append(f"the test binary exited with status {tests_rc}")
if read("selftest.rc", "1") != "0": problems.append("octet selftest failed")

benches = []
bdir = os.path.join(work, "bench")
for f in sorted(os.listdir(bdir)) if os.path.isdir(bdir) else []:
    if f.endswith(".rc"):
        name = f[:-3]
        rc, secs = read(f"bench/{f}").split()
        benches.append((name, int(rc), int(secs), read(f"bench/{name}.cmd"), read(f"bench/{name}.log")))
        if int(rc): problems.append(f"benchmark {name} " + ("timed out" if int(rc) == 124 else f"exited with status {rc}"))

smi = read("smi.txt").splitlines()[0].split(", ") if read("smi.txt") else []
if not smi: problems.append("nvidia-smi did not answer (no driver, or not on the PATH)")
seconds = int(read("seconds.txt", "0"))
ok = not problems
L = [f"# octet GPU check: {'PASS' if ok else 'FAIL'}", "",
     "| | |", "| --- | --- |",
     f"| device | {props.get('device_name', smi[0] if smi else '?')}"
     + (f" ({props['device_count']} visible to octet)" if "device_count" in props else "") + " |",
     f"| driver | {smi[1] if len(smi) > 1 else '?'} (CUDA {props.get('driver_cuda_version', '?')}) |",
     f"| GPU memory, compute capability | {', '.join(smi[2:4]) if len(smi) > 3 else '?'} |",
     f"| cuDNN | {props.get('cudnn_version', '?')} |",
     f"| nvcc on this machine | {read('nvcc.txt')} |",
     f"| commit | {read('commit.txt')} |",
     f"| binaries | {read('how.txt')} |",
     f"| tests ({flt}) | {n['PASS']} passed, {n['FAIL']} failed, {n['SKIP']} skipped"
     + (f", {n['SKIP (no-GPU test)']} no-GPU tests skipped as expected" if n['SKIP (no-GPU test)'] else "") + " |",
     f"| benchmarks | {len(benches)} run, {sum(1 for b in benches if b[1])} failed |",
     f"| total time | {seconds // 60} min {seconds % 60} s |", ""]
if problems:
    L += ["## Problems", ""] + [f"- {p}" for p in problems] + [""]
failed = [t for t in tests if t[1] == "FAIL"]
if failed:
    L += ["## Failures", ""]
    for name, status, _, why in failed:
        L += [f"### {name}", "", "```", why[:4000], "```", ""]
skips = {}
for name, status, _, why in tests:
    if status == "SKIP": skips.setdefault((why.strip().splitlines() or [""])[-1], []).append(name)
if skips:
    L += ["## Skipped (each is a failure on a GPU machine)", ""]
    for why, names in skips.items():
        L += [f"{len(names)} test(s): {', '.join(names)}", "", "```", why[:2000], "```", ""]
if tests:
    L += ["## Tests", "", "| test | result | seconds |", "| --- | --- | ---: |"]
    L += [f"| {name} | {status} | {secs:.3f} |" for name, status, secs, _ in tests] + [""]
if not os.path.exists(xml_path) or (tests_rc and not n["FAIL"]):
    L += ["## Test log (last 60 lines)", "", "```"] + read("tests.log").splitlines()[-60:] + ["```", ""]
L += ["## Benchmarks", ""]
if not benches:
    L += ["No GPU benchmark found (tools/bench/bench_*.cpp or .py whose source takes `--device`).", ""]
for name, rc, secs, cmd, out in benches:
    L += [f"### {name}: {'ok' if rc == 0 else 'FAILED (status %d)' % rc}, {secs} s", "", f"`{cmd}`", "", "```"]
    L += out.splitlines()[-80:] + ["```", ""]
L += ["## octet selftest", "", "```"] + read("selftest.log").splitlines()[-20:] + ["```", ""]
with open(report, "w") as fh:
    fh.write("\n".join(L))
print(f"[gpu_check] {'PASS' if ok else 'FAIL'}: report in {report}" + "".join(f"\n  - {p}" for p in problems), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
  rm -rf "$work"
  return $rc
}

main() {
  case "${1:-}" in
    pack) pack "${2:-}" ;;
    run) run "${2:--}" "${3:-gpu_report.md}" ;;
    *) usage ;;
  esac
}

# On one line, so that bash has read all it runs before it starts (editing the script during a
# long build then cannot change what this run does).
main "$@"; exit $?
