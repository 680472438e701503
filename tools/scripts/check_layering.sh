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
  "core/kernels.cpp 2"         # core's dispatch point (core/kernel_signatures.inc)
  "core/cuda_stub.cpp 2"       # the CUDA-off stubs of core/cuda.h
  "quant/kernels.cpp 2"        # quant's dispatch point (quant/kernel_signatures.inc)
  "optim/device_update.cpp 3"  # optim's dispatch point (the device_update of optim/run_rule.h)
)

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

if [ "$fail" -ne 0 ]; then
  echo "layering: FAILED"
  exit 1
fi
echo "layering: ok"
