#!/usr/bin/env bash
# Installs octet's build and test dependencies from Debian packages. Idempotent: packages that
# are already present are skipped, so a second run does no network work.
# The CUDA toolkit is not installed here: it comes with the machine image (/usr/local/cuda).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libeigen3-dev libdnnl-dev ocl-icd-opencl-dev  # oneDNN's CMake config needs OpenCL
  libyaml-cpp-dev libspdlog-dev libfmt-dev libstb-dev zlib1g-dev libjpeg62-turbo-dev
  nlohmann-json3-dev libcli11-dev
  libcurl4-openssl-dev libarchive-dev  # octet data get: downloads (HTTP Range resume) and unpacking
  libopenmpi-dev openmpi-bin  # data-parallel training: mpirun and the CPU collectives
  iproute2 procps util-linux  # tests/dist: hosts as network namespaces (ip, bridge, tc, unshare), pgrep
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev  # tools/scripts/fuzz.sh: the libFuzzer harnesses (clang 14 on Debian 12)
  dataset-fashion-mnist  # the default recipe's data: /usr/share/datasets/fashion-mnist
  bible-kjv  # recipes/gpt_kjv_bpe.yaml: the King James Bible (bible-kjv-text) and its reader, for tools/bench/kjv_corpus.py
  dict-gcide  # recipes/gpt_gcide_bpe.yaml: Webster's 1913 dictionary, for tools/bench/gcide_corpus.py
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all dependencies present"
fi
