#!/usr/bin/env bash
# The layering check (run by ci_extra.sh, and by ctest as `layering`):
#  1. Dependencies run one way: core < data, layers < quant, models < optim < data/fetch <
#     tools/train < tools/bench < tools/cli. A file may include headers from its own folder and from
#     folders below it; data and layers are siblings (neither includes the other), as are quant and
#     models. data/fetch (downloads, archives, checksums, MAT files: the octet_fetch library) is a
#     component of its own above the core library (liboctet: core ... optim), which never includes
#     it, and below the trainer.
#     The umbrella header core/octet.h stands above the whole library (it includes every folder, so
#     <octet/octet.h> is the whole C++ API) and below tools/; it lives in core/ only because it is
#     installed as <octet/octet.h>. Nothing in the library includes it.
#  2. No new `#if(def) OCTET_WITH_CUDA`: device dispatch belongs in each folder's dispatch files.
#  3. One dispatch pattern: device-agnostic code reaches kernels through its folder's dispatch point
#     only (core/kernels.h, quant/kernels.h, optim/kernels.h; the pattern: core/kernel_dispatch.h).
#     A file outside the backend folders (core/cpu, core/cuda, quant/cpu, quant/cuda, optim/cpu,
#     optim/cuda, and the CUDA/MPI-only core/nccl, core/mpi) includes no header of them, so it
#     cannot call a cpu:: or cuda:: kernel (core/cuda.h, the device runtime, is not a kernel
#     header); tools/bench, which times kernels one by one, may. Only the dispatch points include
#     core/kernel_dispatch.h.
# The build enforces the order too (tools/cmake/components.cmake: a folder's target compiles
# against the headers of the folders it may use and no others); this check names the file, and
# covers what an include path cannot: the exceptions pair by pair, includes by a relative path, the
# umbrella header, the #ifdefs. Known exceptions are listed with their reason
# (layering_exceptions.txt, and the CUDA list below); anything else fails, naming the file.
#   bash tools/scripts/check_layering.sh            # from anywhere in the repository
set -euo pipefail
cd "$(dirname "$0")/../.."

level() {
  case "$1" in
    core) echo 0 ;;
    data | layers) echo 1 ;;
    quant | models) echo 2 ;;
    optim) echo 3 ;;
    data/fetch) echo 4 ;;
    tools/train) echo 5 ;;
    tools/bench) echo 6 ;;
    tools/cli) echo 7 ;;
    *) echo -1 ;;
  esac
}

# "file -> included header" pairs that break the order today, each with its reason, in
# layering_exceptions.txt (read by the build too: a folder's target sees only those headers of a
# folder above it).
mapfile -t allowed_includes < <(grep -vE '^[[:space:]]*(#|$)' tools/scripts/layering_exceptions.txt)

# The files whose OCTET_WITH_CUDA conditionals are allowed, with their count: each folder's one
# dispatch point, and core's CUDA-off stubs. A new conditional anywhere else fails.
allowed_cuda_ifdefs=(
  "core/kernel_dispatch.h 1"   # the dispatch body every folder's dispatch point expands
  "core/cuda_stub.cpp 2"       # the CUDA-off stubs of core/cuda.h
)

# The dispatch points: the files that may include the backends' headers and core/kernel_dispatch.h.
dispatch_points=(
  core/kernel_dispatch.h
  core/kernels.cpp
  quant/kernels.cpp
  optim/kernels.cpp
)

# "file -> backend header" pairs of device-agnostic files that remain, each with its reason.
allowed_backend_includes=(
  # The channels-last choice follows the CPU convolution path that runs (its selector).
  "core/memory_format.cpp -> core/cpu/conv_dnnl.h"
  # Host-side weight preparation (quantized once on the host, then moved to the device) and the
  # raw-pointer host GEMM of the public API: CPU code by design, vectorized per ISA.
  "quant/qgemm.cpp -> core/cpu/isa.h"
  # autocast's log line and its native-or-emulated choice follow the CPU's bf16 path (its selector).
  "core/autocast.cpp -> core/cpu/isa.h"
  "quant/qgemm.cpp -> quant/cpu/qgemm.h"
  "quant/pbatch.cpp -> core/cpu/isa.h"
  "quant/pbatch.cpp -> quant/cpu/pbatch.h"
  "quant/pbatch.cpp -> quant/cpu/pbatch_kernels.h"
)

is_backend_file() {
  case "$1" in
    core/cpu/* | core/cuda/* | core/nccl/* | core/mpi/* | quant/cpu/* | quant/cuda/* | optim/cpu/* | optim/cuda/*) return 0 ;;
    tools/bench/*) return 0 ;;
    *) return 1 ;;
  esac
}

folder_of() {
  case "$1" in
    tools/* | data/fetch/*) echo "$1" | cut -d/ -f1-2 ;;
    *) echo "$1" | cut -d/ -f1 ;;
  esac
}

fail=0
while IFS= read -r file; do
  from=$(folder_of "$file")
  from_level=$(level "$from")
  [ "$from_level" -ge 0 ] || continue
  while IFS= read -r inc; do
    [ -n "$inc" ] || continue
    to=$(folder_of "$inc")
    to_level=$(level "$to")
    [ "$to_level" -ge 0 ] || continue  # a file of the same folder by relative name, or not octet's
    if [ "$inc" = core/octet.h ]; then
      if [ "$from_level" -lt 5 ]; then
        echo "layering: $file includes the umbrella core/octet.h (only tools/ and users may)"
        fail=1
      fi
      continue
    fi
    [ "$file" = core/octet.h ] && continue
    if [ "$to" != "$from" ] && { [ "$to_level" -gt "$from_level" ] ||
      { [ "$to_level" -eq "$from_level" ] && [ "$from_level" -le 2 ]; }; }; then
      pair="$file -> $inc"
      if ! printf '%s\n' "${allowed_includes[@]}" | grep -qxF "$pair"; then
        echo "layering: $pair ($from may not include $to:" \
          "core < data, layers < quant, models < optim < data/fetch < tools)"
        fail=1
      fi
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(git ls-files 'core/*' 'data/*' 'layers/*' 'quant/*' 'models/*' 'optim/*' 'tools/*' |
  grep -E '\.(h|cpp|cu|cuh|inc)$')

while IFS= read -r file; do
  n=$(grep -cE '^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif)\b.*OCTET_WITH_CUDA' "$file" || true)
  [ "$n" -gt 0 ] || continue
  allowed=0
  for entry in "${allowed_cuda_ifdefs[@]}"; do
    [ "${entry%% *}" = "$file" ] && allowed=${entry##* }
  done
  if [ "$n" -gt "$allowed" ]; then
    echo "layering: $file has $n OCTET_WITH_CUDA conditionals ($allowed allowed): dispatch by device through" \
      "the folder's dispatch point, not #ifdef"
    fail=1
  fi
done < <(git ls-files 'core/*' 'data/*' 'layers/*' 'quant/*' 'models/*' 'optim/*' 'tools/*' |
  grep -E '\.(h|cpp|cu|cuh|inc)$')

while IFS= read -r file; do
  is_backend_file "$file" && continue
  printf '%s\n' "${dispatch_points[@]}" | grep -qxF "$file" && continue
  while IFS= read -r inc; do
    case "$inc" in
      core/kernel_dispatch.h)
        echo "layering: $file includes core/kernel_dispatch.h (only the dispatch points may:" \
          "${dispatch_points[*]})"
        fail=1
        ;;
      core/cpu/* | core/cuda/* | quant/cpu/* | quant/cuda/* | optim/cpu/* | optim/cuda/*)
        pair="$file -> $inc"
        if ! printf '%s\n' "${allowed_backend_includes[@]}" | grep -qxF "$pair"; then
          echo "layering: $pair (device-agnostic code calls kernels through its folder's dispatch point:" \
            "add the kernel to <folder>/kernel_signatures.inc and call kernels::, quant::dispatch:: or optim::dispatch::)"
          fail=1
        fi
        ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(git ls-files 'core/*' 'data/*' 'layers/*' 'quant/*' 'models/*' 'optim/*' 'tools/*' |
  grep -E '\.(h|cpp|cu|cuh|inc)$')

if [ "$fail" -ne 0 ]; then
  echo "layering: FAILED"
  exit 1
fi
echo "layering: ok"
