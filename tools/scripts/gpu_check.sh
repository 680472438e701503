#!/usr/bin/env bash
# gpu_check.sh: one command that checks octet's CUDA backend on a machine with a GPU and writes
# one markdown report (device, driver, CUDA/cuDNN versions, commit, pass/fail of every CUDA test,
# the GPU benchmarks' output, total time). Exits non-zero on any failure; a test SKIPPED on a GPU
# machine is a failure too (the device was not usable), unless its skip message says it is a test
# for machines without a GPU ("... has a GPU", "... device is present"). Aims at < 10 min on an H100.
#
#   tools/scripts/gpu_check.sh pack [--from-build BUILD] DIR
#     Runs on a machine with octet's dependencies (tools/scripts/setup.sh) and the CUDA toolkit; no GPU
#     needed. Configures and builds build-gpu/ (Release, -DOCTET_CUDA=ON, -DOCTET_WERROR=ON,
#     CMAKE_CUDA_ARCHITECTURES=${OCTET_CUDA_ARCH:-90}) and copies into DIR: bin/octet_tests,
#     bin/octet, bin/<GPU benchmark programs>, bench/<GPU benchmark scripts>, lib/liboctet.so.0 and
#     every shared library they load that is neither part of a base system (glibc, libstdc++,
#     libgcc_s) nor of the CUDA toolkit or driver (libcuda, cudart, cuBLAS, cuDNN, nvrtc, ...: the
#     GPU machine brings those), stripped, in one DIR/payload.tar.gz (42 MiB in 2026-11, 124 MiB
#     unpacked: libdnnl 11 MiB of it, ICU's data 12 MiB (liboctet_fetch -> libarchive -> libxml2 ->
#     ICU), liboctet 5; the device tool carries 64 MiB in all, the checkout's files included: over
#     60 is an error).
#     DIR/MANIFEST.txt names the commit, the build, the paths compiled into the tests and every
#     file; this script is copied to DIR/gpu_check.sh. --from-build packs what BUILD (a configured
#     and built build folder, CUDA or not) already holds instead of building build-gpu/: the
#     rehearsal's way, since the CUDA build takes half an hour on 2 cores.
#
#   tools/scripts/gpu_check.sh run [DIR|-] [REPORT]
#     Runs on the GPU machine. With DIR (a pack) it unpacks the payload to a temporary folder, sets
#     LD_LIBRARY_PATH to its lib/ plus the folders holding the CUDA libraries the binaries need,
#     found by soname under /usr/local/cuda*, the driver's folders, ldconfig's cache and python3's
#     nvidia-* wheels (where PyTorch's cuBLAS and cuDNN live), says where each library resolves
#     (the pack, the base system, CUDA), and starts octet and octet_tests (--version,
#     --gtest_list_tests) with every symbol bound. Then it looks for a GPU (nvidia-smi,
#     /dev/nvidia*): with none it stops there, with one line "no GPU found (...): nothing run"
#     and exit status 3, so a machine without a GPU rehearses the unpacking and the library
#     discovery in seconds. Where the source folder and the CLI compiled into octet_tests (MANIFEST's source: and cli:) are
#     missing, as where the device tool copies the checkout elsewhere, it links them to the
#     checkout around DIR and to the pack's octet for the run (the training tests read recipes/).
#     Without DIR (or with "-") it looks for the GPU first, then configures and builds
#     build-gpu/ from this checkout (the machine then needs octet's dependencies; the CUDA
#     architecture defaults to "native"). REPORT defaults to gpu_report.md. Steps: nvidia-smi,
#     `octet selftest`, octet_tests --gtest_filter="${GTEST_FILTER:-*Cuda*}" with XML output (one
#     row per test in the report; the XML and the log are kept beside REPORT as gpu_tests.xml and
#     gpu_tests.log), each GPU benchmark (none with GPU_CHECK_BENCH=0), the report.
#
#   tools/scripts/gpu_check.sh rehearse BUILD [DIR]
#     The rehearsal, ctest's gpu_check_rehearsal (tests/CMakeLists.txt), so this tooling cannot rot
#     unseen between the rare GPU loans: `pack --from-build BUILD DIR` (DIR defaults to
#     BUILD/gpu_check_rehearsal), then the pack's own copy of this script `run`s it with
#     GPU_CHECK_REHEARSAL=1, which stops before the tests even where a GPU is found. Passes when
#     that run ends within ${REHEARSAL_MAX_S:-30} s with exit status 3 and the "nothing run" line;
#     a broken unpacking, a library that resolves neither in the pack nor among the base system's
#     and CUDA's, a binary that does not start from the pack, or a pack over the size limit fails
#     it (~10 s in all). Removes DIR when it passes.
#
# Exit status: 0 all passed, 1 a failure (see the report or the error), 2 usage, 3 nothing run (no
# GPU found, or a rehearsal).
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
#              because the device tool sends that checkout, whichever worktree a helper calls from),
#              then bash build-gpu-pack/gpu_check.sh run build-gpu-pack here: it must stop within
#              seconds on "no GPU found (...): nothing run" (status 3), or the GPU time would be
#              lost on the same error
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
# replaced by the folder holding the benchmark scripts, {python} by python3 with the library path
# the run started with. "-" means: not on its own (another
# benchmark runs it, as octet_bench_train runs its PyTorch companion for a side-by-side table).
declare -A BENCH_ARGS=(
  [octet_bench_train]="--int8 --torch-script {bench}/bench_train_torch.py --python {python}"
  [bench_train_torch]="-"
  [octet_bench_int8]="--reps 5 --batch 32"
  [octet_bench_attention]="--batch 4 --heads 8 --torch-script {bench}/bench_attention_torch.py --python {python}"
  [bench_attention_torch]="-"
)
# GPU benchmarks that are subcommands of the octet CLI: report name -> arguments.
declare -A CLI_BENCHES=(
  [octet_bench_pbatch]="bench pbatch --device cuda --sizes 512,1024,2048,4096,8192"
)

# Libraries the GPU machine provides: the base system and the CUDA toolkit/driver (some ldd name
# the loader by its path).
SYSTEM_LIBS='^(.*/)?(linux-vdso|linux-gate|ld-linux|libc\.so|libm\.so|libmvec|libstdc\+\+|libgcc_s|libpthread|libdl\.so|librt\.so|libresolv|libutil\.so)'
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

# A value from BUILD's CMakeCache.txt (empty when it is not there).
cache_value() {  # build name
  sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt" 2> /dev/null | head -1
}

pack() {  # [--from-build BUILD] DIR
  local build="" from_build=""
  if [[ ${1:-} == --from-build ]]; then
    from_build=${2:-}
    [[ -n $from_build ]] || usage
    shift 2
  fi
  local dir=${1:-}
  [[ -n $dir ]] || usage
  [[ $(uname -m) == x86_64 ]] || log "warning: packing on $(uname -m); the GPU machines are x86-64"
  if [[ -n $from_build ]]; then
    build=$(cd "$from_build" && pwd)
    [[ -f $build/CMakeCache.txt && -f $build/octet && -f $build/tests/octet_tests ]] ||
      { log "error: $build holds no built octet and tests/octet_tests"; return 1; }
  else
    build=${BUILD_DIR:-$ROOT/build-gpu}
    configure_and_build "$build" "${OCTET_CUDA_ARCH:-90}"
  fi

  # DIR is emptied first: refuse a folder that is neither empty nor an earlier pack (a mistyped
  # `pack .` would take the checkout with it).
  if [[ -d $dir && -n $(ls -A "$dir") && ! -f $dir/MANIFEST.txt ]]; then
    log "error: $dir is not empty and holds no earlier pack (no MANIFEST.txt): not overwriting it"
    return 1
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local stage
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib" "$stage/bench"
  cp "$build/tests/octet_tests" "$build/octet" "$stage/bin/"
  local b exe
  for b in $(gpu_bench_sources); do
    if [[ $b == *.cpp ]]; then
      exe=$build/tools/bench/octet_${b%.cpp}
      # A build folder configured without benchmarks packs none; one built here always has them.
      if [[ ! -e $exe && -n $from_build && $(cache_value "$build" OCTET_BUILD_BENCH) =~ ^(OFF|0|FALSE|NO|N|off|false|no)$ ]]; then
        log "$build was configured with OCTET_BUILD_BENCH=OFF: ${exe##*/} left out"
        continue
      fi
      cp "$exe" "$stage/bin/"
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
    [[ $path == "not" ]] && { log "error: $name is not found on this machine"; rm -rf "$stage"; return 1; }
    [[ -e $stage/lib/$name ]] || cp -L "$path" "$stage/lib/$name"
  done < <(ldd "$stage"/bin/* "$stage/lib/$soname" | awk '/=>/{print $1, $3}' | sort -u)
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/* 2> /dev/null || log "warning: strip failed on some files"
  # One gzip tarball: ~10 s for 124 MiB. xz -6 would save a third (28 MiB) but take 3 minutes, too
  # slow for the rehearsal, which must pack as the real pack does.
  tar -C "$stage" -czf "$dir/payload.tar.gz" bin lib bench
  cp "${BASH_SOURCE[0]}" "$dir/gpu_check.sh"
  chmod +x "$dir/gpu_check.sh"

  local how="Release, CUDA architectures ${OCTET_CUDA_ARCH:-90}"
  [[ -z $from_build ]] ||
    how="from $build (CMAKE_BUILD_TYPE=$(cache_value "$build" CMAKE_BUILD_TYPE), OCTET_CUDA=$(cache_value "$build" OCTET_CUDA))"
  {
    echo "octet GPU check pack: payload.tar.gz holds bin/, lib/ and bench/; run it with gpu_check.sh run DIR"
    echo "commit: $(git -C "$ROOT" rev-parse HEAD 2> /dev/null || echo unknown)" \
      "($(git -C "$ROOT" status --porcelain 2> /dev/null | wc -l) uncommitted changes)"
    echo "subject: $(git -C "$ROOT" log -1 --format=%s 2> /dev/null || echo unknown)"
    echo "packed: $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
    echo "build: $how, $(nvcc --version 2> /dev/null | grep -o 'release [0-9.]*' || echo 'nvcc unknown'), $(c++ --version | head -1)"
    # Absolute paths compiled into octet_tests (OCTET_TESTS_DIR, OCTET_CLI): `run` links them
    # where the GPU machine lacks them.
    echo "source: $(cache_value "$build" CMAKE_HOME_DIRECTORY)"
    echo "cli: $build/octet"
    echo "benchmarks: $(gpu_bench_sources | tr '\n' ' ')"
    echo "files (bytes, uncompressed):"
    (cd "$stage" && find . -type f -printf '  %P %s\n' | sort)
  } > "$dir/MANIFEST.txt"
  rm -rf "$stage"
  # The device tool carries the pack with the checkout's files (tracked, and untracked but not
  # ignored), 64 MiB in all: both count, with 4 MiB to spare.
  local size tree
  size=$(du -sb "$dir" | cut -f1)
  tree=$(cd "$ROOT" && git ls-files -z -co --exclude-standard 2> /dev/null | xargs -0 -r stat -c %s 2> /dev/null |
    awk '{ s += $1 } END { print s + 0 }')
  log "pack in $dir: $((size / 1024 / 1024)) MiB ($size bytes; the checkout's files $((tree / 1024 / 1024)) MiB more)"
  ((size + tree < 60 * 1024 * 1024)) ||
    { log "error: the pack and the checkout are over 60 MiB together (the device tool carries 64 MiB in all)"; return 1; }
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

# ldd's report on every file of the pack, errors included. ldd fails on scripts and tolerates
# nothing else: its output is what counts.
ldd_pack() {  # pack_dir
  ldd "$1"/bin/* "$1"/lib/* 2>&1 || true
}

# "name path" for every library in ldd's report, as it resolves now (path "not" when it finds none).
resolved_libraries() {  # < ldd's report
  awk '$2 == "=>" { print $1, $3 }' | sort -u
}

# Adds to LD_LIBRARY_PATH, after the pack's lib/, the folder holding each CUDA library the pack's
# files load, found or not through their RUNPATH (the packing machine's folders, which need not
# exist here), plus those loaded with dlopen (the driver by cudart, nvrtc by cuDNN's runtime-compiled
# engines). Repeats, since a library found brings its own (cuBLAS brings cuBLASLt).
setup_library_path() {  # pack_dir
  local dir=$1 so c candidates names
  export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  mapfile -t candidates < <(cuda_lib_candidates)
  for _ in 1 2 3; do
    local before=$LD_LIBRARY_PATH
    names=$(ldd_pack "$dir" | resolved_libraries | awk '{ print $1 }' | grep -E "$CUDA_LIBS" || true)
    for so in $names libcuda.so.1 libnvrtc.so.13 libnvrtc.so.12; do
      [[ $so == libcuda.so.1 || $so == libnvrtc* ]] && ldconfig -p 2> /dev/null | grep -q "$so " && continue
      for c in "${candidates[@]}"; do
        if [[ -e $c/$so ]]; then
          [[ :$LD_LIBRARY_PATH: == *":$c:"* ]] || LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$c"
          break
        fi
      done
    done
    [[ $LD_LIBRARY_PATH != "$before" ]] || break
  done
  log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
}

# Says where each library the pack's files load resolves: the pack, the base system, CUDA (by
# folder), and where the dlopen'd driver is. Fails on a library found nowhere that is not CUDA's
# (the pack misses it), on CUDA's missing where there is a GPU (nothing could run), on a binary
# needing a newer glibc or libstdc++ than this machine's, and, without a GPU (a rehearsal), on a
# library that resolves outside the pack only because this machine has it (the GPU machine has
# no oneDNN, yaml-cpp, ...). Without a GPU, missing CUDA libraries are only listed.
check_libraries() {  # pack_dir has_gpu
  local dir=$1 gpu=$2 name path report versions pack=0 system=0 f
  local -a lost=() outside=() absent=()
  CUDA_ABSENT=0
  local -A cuda=()
  report=$(ldd_pack "$dir")
  versions=$(grep "version .* not found" <<< "$report" | sort -u || true)
  [[ -z $versions ]] || { log "error: the pack needs newer base libraries than this machine's:"$'\n'"$versions"; return 1; }
  while read -r name path; do
    if [[ $path == not ]]; then
      if [[ $name =~ $CUDA_LIBS ]]; then absent+=("$name"); else lost+=("$name"); fi
    elif [[ $path == "$dir/lib/"* ]]; then
      pack=$((pack + 1))
    elif [[ $name =~ $SYSTEM_LIBS ]]; then
      system=$((system + 1))
    elif [[ $name =~ $CUDA_LIBS ]]; then
      cuda[${path%/*}]+=" $name"
    else
      outside+=("$name ($path)")
    fi
  done < <(resolved_libraries <<< "$report")
  log "libraries: $pack from the pack's lib/, $system from the base system"
  for f in "${!cuda[@]}"; do log "CUDA libraries from $f:${cuda[$f]}"; done
  CUDA_ABSENT=${#absent[@]}
  ((CUDA_ABSENT == 0)) || log "CUDA libraries not on this machine (a GPU machine brings them): ${absent[*]}"
  f=$( (ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 ' && echo "ldconfig's cache") ||
    (IFS=:; for c in $LD_LIBRARY_PATH; do [[ -e $c/libcuda.so.1 ]] && echo "$c" && break; done) || true)
  log "the driver's libcuda.so.1 (cudart loads it): ${f:-not found}"
  ((${#lost[@]} == 0)) || { log "error: libraries found neither in the pack nor on this machine: ${lost[*]}"; return 1; }
  if ((${#outside[@]})); then
    if ((gpu)); then
      log "outside the pack, found on this machine: ${outside[*]}"
    else
      log "error: libraries outside the pack, found only because this machine has them: ${outside[*]}"
      return 1
    fi
  fi
  if ((gpu && ${#absent[@]})); then
    log "error: CUDA libraries not found on this GPU machine: ${absent[*]} (looked in: $(cuda_lib_candidates | tr '\n' ' '))"
    return 1
  fi
  return 0
}

# ldd reads library names only: starting octet and octet_tests (listing the tests, no GPU needed)
# with every symbol bound at once (LD_BIND_NOW) shows that the libraries they load are the ones
# they were built against. Without a GPU a failure is an error; with one, a warning, and the tests
# then say more.
start_binaries() {  # bin_dir has_gpu
  local bin=$1 gpu=$2 exe out rc=0 version="" tests=""
  if ((CUDA_ABSENT)); then
    log "binaries not started: the CUDA libraries they load are not on this machine"
    return 0
  fi
  exe=octet
  version=$(cd / && LD_BIND_NOW=1 timeout 60 "$bin/octet" --version 2>&1) || rc=$?
  if ((rc == 0)); then
    exe=octet_tests
    tests=$(cd / && LD_BIND_NOW=1 timeout 60 "$bin/octet_tests" --gtest_list_tests --gtest_filter="$FILTER" 2>&1) || rc=$?
  fi
  if ((rc == 0)); then
    log "the binaries start: ${version}; octet_tests lists $(grep -c '^  ' <<< "$tests") tests matching $FILTER"
    return 0
  fi
  out=$(tail -n 2 <<< "${tests:-$version}" | tr '\n' ' ' | sed 's/ *$//')
  log "$( ((gpu)) && echo warning || echo error): $exe does not start from the pack (status $rc): ${out:-no output}"
  ((gpu))
}

# Whether this machine has an NVIDIA GPU; GPU_WHY says what was seen. A device node without a
# working nvidia-smi still counts: then the tests say what is wrong, rather than a GPU loan ending
# with nothing tried.
find_gpu() {
  local smi
  if ! command -v nvidia-smi > /dev/null; then
    GPU_WHY="nvidia-smi missing"
  elif smi=$(timeout 60 nvidia-smi -L 2> /dev/null | grep -m1 '^GPU '); then
    GPU_WHY=$smi
    return 0
  else
    GPU_WHY="nvidia-smi lists no GPU"
  fi
  if compgen -G '/dev/nvidia[0-9]*' > /dev/null; then
    GPU_WHY+=", but /dev/nvidia* exists"
    return 0
  fi
  GPU_WHY+=", no /dev/nvidia*"
  return 1
}

# octet_tests holds two absolute paths of the machine that built it (MANIFEST's source: and cli:):
# the source folder (OCTET_TESTS_DIR: the TrainerCuda and CudaInt8 training tests read recipes/
# there, others goldens under tests/) and the CLI (OCTET_CLI, which some tests run as a process).
# The device tool copies the checkout to a folder of its own, so where a path is missing here this
# plans a link from it to the checkout holding the pack, or to the pack's bin/octet: LINK_AT[i] ->
# LINK_TO[i], made only when the tests are about to run.
plan_links() {  # pack_dir unpacked_dir
  local dir=$1 unpacked=$2 source cli checkout
  LINK_AT=()
  LINK_TO=()
  source=$(sed -n 's/^source: //p' "$dir/MANIFEST.txt")
  cli=$(sed -n 's/^cli: //p' "$dir/MANIFEST.txt")
  if [[ -z $source || -d $source/tests ]]; then
    log "the tests' source folder ${source:-(not in MANIFEST.txt)}: present"
  elif [[ -e $source ]]; then
    log "warning: the tests' source folder $source holds no tests/: the tests that read recipes or goldens will fail"
  else
    checkout=$dir
    while [[ $checkout != / && ! (-f $checkout/tests/CMakeLists.txt && -d $checkout/recipes) ]]; do
      checkout=$(dirname "$checkout")
    done
    if [[ $checkout == / ]]; then
      log "warning: the tests' source folder $source is not here, nor is a checkout around $dir:" \
        "the tests that read recipes or goldens will fail"
    else
      log "the tests' source folder $source: not here, to be linked to $checkout"
      LINK_AT+=("$source")
      LINK_TO+=("$checkout")
    fi
  fi
  if [[ -n $cli && ! -e $cli ]]; then
    log "the tests' octet CLI $cli: not here, to be linked to the pack's"
    LINK_AT+=("$cli")
    LINK_TO+=("$unpacked/bin/octet")
  fi
  return 0
}

run() {
  local dir=${1:--} report=${2:-gpu_report.md}
  local t0 work bin bench_dir commit how gpu=0 i
  t0=$(date +%s)
  # Python (PyTorch) runs with the library path it came with: the CUDA folders added for octet can
  # hold an older cuDNN than PyTorch's own, which PyTorch then refuses to start with.
  local python_env="LD_LIBRARY_PATH=${LD_LIBRARY_PATH-}"
  find_gpu && gpu=1

  if [[ $dir == - ]]; then
    # A build for the GPU ("native") is pointless, and fails, without one.
    ((gpu)) || { log "no GPU found ($GPU_WHY): nothing run"; return 3; }
    local build=${BUILD_DIR:-$ROOT/build-gpu}
    configure_and_build "$build" "${OCTET_CUDA_ARCH:-native}"
    work=$(mktemp -d)
    bin=$work/bin
    mkdir -p "$bin"
    ln -s "$build/tests/octet_tests" "$build/octet" "$bin/"
    for b in "$build"/tools/bench/octet_bench_*; do
      [[ -x $b ]] && gpu_bench_sources | grep -qx "${b##*/octet_}.cpp" && ln -s "$b" "$bin/"
    done
    bench_dir=$ROOT/tools/bench
    commit="$(git -C "$ROOT" rev-parse HEAD 2> /dev/null || echo unknown) ($(git -C "$ROOT" status --porcelain 2> /dev/null | wc -l) uncommitted changes)"
    how="built from source in $build"
    LINK_AT=()
  else
    [[ -f $dir/payload.tar.gz ]] || { log "error: $dir is not a pack (no payload.tar.gz); make one with: $0 pack DIR"; return 1; }
    dir=$(cd "$dir" && pwd)
    work=$(mktemp -d)
    mkdir -p "$work/pack"
    tar -C "$work/pack" -xzf "$dir/payload.tar.gz" || { log "error: could not unpack $dir/payload.tar.gz"; rm -rf "$work"; return 1; }
    log "unpacked $dir/payload.tar.gz: $(find "$work/pack" -type f | wc -l) files, $(du -sm "$work/pack" | cut -f1) MiB"
    setup_library_path "$work/pack"
    check_libraries "$work/pack" "$gpu" || { rm -rf "$work"; return 1; }
    start_binaries "$work/pack/bin" "$gpu" || { rm -rf "$work"; return 1; }
    plan_links "$dir" "$work/pack"
    # Everything a machine without a GPU can check is checked: stop before the tests.
    ((gpu)) || { rm -rf "$work"; log "no GPU found ($GPU_WHY): nothing run"; return 3; }
    bin=$work/pack/bin
    bench_dir=$work/pack/bench
    commit=$(sed -n 's/^commit: //p' "$dir/MANIFEST.txt")
    how="pack $(sed -n 's/^packed: //p' "$dir/MANIFEST.txt"); $(sed -n 's/^build: //p' "$dir/MANIFEST.txt")"
  fi
  log "GPU: $GPU_WHY"
  command -v python3 > /dev/null || { log "error: python3 is needed to write the report"; rm -rf "$work"; return 1; }
  if [[ ${GPU_CHECK_REHEARSAL:-} == 1 ]]; then
    rm -rf "$work"
    log "a GPU was found, but GPU_CHECK_REHEARSAL=1 asks for a rehearsal: nothing run"
    return 3
  fi
  local made=()
  for i in "${!LINK_AT[@]}"; do
    if mkdir -p "$(dirname "${LINK_AT[$i]}")" && ln -s "${LINK_TO[$i]}" "${LINK_AT[$i]}"; then
      made+=("${LINK_AT[$i]}")
      log "linked ${LINK_AT[$i]} -> ${LINK_TO[$i]}"
    else
      log "warning: could not link ${LINK_AT[$i]} -> ${LINK_TO[$i]}: the tests that need it will fail"
    fi
  done

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
  # The per-test XML and the whole log are kept beside the report.
  local keep
  keep=$(dirname "$report")
  for i in tests.xml tests.log; do [[ -f $work/$i ]] && cp "$work/$i" "$keep/gpu_$i"; done

  mkdir -p "$work/bench"
  printf '#!/bin/sh\nexec env %q python3 "$@"\n' "$python_env" > "$work/python3"
  chmod +x "$work/python3"
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
  [[ ${GPU_CHECK_BENCH:-1} == 0 ]] && log "GPU_CHECK_BENCH=0: no benchmarks"
  for exe in "$bin"/octet_bench_* "$bench_dir"/bench_*.py; do
    [[ ${GPU_CHECK_BENCH:-1} == 0 ]] && break
    [[ -e $exe ]] || continue
    name=$(basename "$exe" .py)
    [[ $exe == *.py ]] && ! grep -q -- '--device' "$exe" && continue
    local extra=${BENCH_ARGS[$name]:-}
    [[ $extra == - ]] && continue
    local cmd=("$exe")
    [[ $exe == *.py ]] && cmd=("$work/python3" "$exe")
    extra=${extra//\{bench\}/$bench_dir}
    # shellcheck disable=SC2206  # the extra arguments are words
    cmd+=(--device cuda ${extra//\{python\}/$work/python3})
    bench "$name" "${cmd[@]}"
  done
  for name in "${!CLI_BENCHES[@]}"; do
    [[ ${GPU_CHECK_BENCH:-1} == 0 ]] && break
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
  ((${#made[@]} == 0)) || rm -f "${made[@]}"
  return $rc
}

# ---------------------------------------------------------------- rehearse

rehearse() {  # build [dir]
  local build=${1:-} dir=${2:-} rc=0 out last t0 ms max=${REHEARSAL_MAX_S:-30}
  [[ -n $build ]] || usage
  dir=${dir:-$build/gpu_check_rehearsal}
  pack --from-build "$build" "$dir"
  # The pack's own copy of the script, from another folder: as the GPU machine runs it.
  t0=$(date +%s%N)
  out=$(cd / && GPU_CHECK_REHEARSAL=1 bash "$dir/gpu_check.sh" run "$dir" 2>&1) || rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  printf '%s\n' "$out" >&2
  last=$(tail -n 1 <<< "$out")
  if ((rc != 3)) || [[ $last != "[gpu_check] "*": nothing run" ]]; then
    log "error: rehearsal: the run should stop on '... nothing run' with status 3; it ended with status $rc"
    return 1
  fi
  ((ms < max * 1000)) || { log "error: rehearsal: the run took $ms ms, over ${max} s"; return 1; }
  log "rehearsal passed: the run unpacked $(du -b "$dir/payload.tar.gz" | cut -f1) bytes, resolved its libraries and stopped in $ms ms"
  rm -rf "$dir"
}

main() {
  case "${1:-}" in
    pack) pack "${@:2}" ;;
    run) run "${2:--}" "${3:-gpu_report.md}" ;;
    rehearse) rehearse "${@:2}" ;;
    *) usage ;;
  esac
}

# On one line, so that bash has read all it runs before it starts (editing the script during a
# long build then cannot change what this run does).
main "$@"; exit $?
