#!/usr/bin/env bash
# The second half of CI, run by README's test command after the main ctest:
#   1. every fuzz harness (tests/fuzz) for OCTET_CI_FUZZ_RUNS executions (default 20000) from a fixed
#      seed, on its seed corpus: the same inputs on every machine, so CI does not depend on luck
#      (the long, randomly seeded runs are tools/scripts/fuzz.sh's, recorded in tools/bench/RESULTS.md);
#   2. the test suite built with AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer
#      (build-asan, clang, CUDA off, MPI off, -O1) and run with ctest; any report fails its test.
#      Clang, while the main build is GCC's: the code is kept building with both, and on a 2-core
#      Zen 3 clang built this ~16% faster and its tests ran in 6.4 min where GCC's took ~9. MPI off:
#      this is also the build without MPI (one process, core/mpi_stub.cpp), and Open MPI's own
#      allocations would read as leaks; the main ctest runs the MPI tests under mpirun.
# Fuzzing takes about 2 minutes plus ~1 minute to build the harnesses.
set -euo pipefail
cd "$(dirname "$0")/../.."

t0=$(date +%s)
bash tools/scripts/fuzz.sh --seed 1 --runs "${OCTET_CI_FUZZ_RUNS:-20000}"
t1=$(date +%s)

# A build-asan from before this build moved to clang is GCC's: CMake drops a cache whose compiler
# changes, and with it the options below, so it goes first.
if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++$' build-asan/CMakeCache.txt; then
  rm -rf build-asan
fi
cmake -S . -B build-asan -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DOCTET_CUDA=OFF -DOCTET_MPI=OFF -DOCTET_SANITIZE=ON \
  -DOCTET_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1"
cmake --build build-asan -j2
# install_consumer builds a separate project against the library, which would need the sanitizer
# runtime flags too; the plain build's ctest runs it. The long runs below repeat, for hundreds of
# steps, kernels and trainer paths that shorter tests already take through ASan; at -O1 with ASan
# they took 30-110 s each (~7 of CI's minutes), so only the plain build's ctest runs them. The two
# GPT runs (47-67 s each under ASan on a Zen 3) compare tens of steps with 32-bit/f32 ones; the
# same paths run under ASan in GptTrainer's resume tests and in Optim8bit's and Autocast's.
long_runs=(
  GptTrainer.EightBitAdamWTracks32Bit
  GptTrainer.Bf16LearnsAsF32Does
  Optim8bitSparse.RareRowsMoveAsUnder32BitAdam
  Optim8bitSparse.RareElementsInsideBlocksStayBounded
  Optim8bit.TrainingTracks32BitAdam
  Optim8bit.FiftyResyncedStepsAgree
  TrainerInt8.Cifar10RecipeTrainsOnGeneratedData
  CheckpointCrash.KilledTrainingRunsResumeToTheSameWeights
)
skip="^(install_consumer$(printf '|%s' "${long_runs[@]}"))\$"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 LSAN_OPTIONS=suppressions="$PWD/tests/lsan.supp" \
  ctest --test-dir build-asan --output-on-failure -j2 -E "$skip"
t2=$(date +%s)
echo "ci_extra: fuzzing $((t1 - t0)) s, sanitizer build and tests $((t2 - t1)) s"
