#!/usr/bin/env bash
# 8-bit vs 32-bit Adam on an LSTM language model, with a StableEmbedding and with a plain one (the
# ablation of Dettmers et al., table 3), on the generated toy-grammar corpus of
# recipes/lstm_lm_tiny.yaml: trains the four runs and prints each best checkpoint's valid and test
# perplexity. Extra arguments are recipe overrides for every run (e.g. train.epochs=2).
#   tools/bench/lm_8bit.sh [OCTET_BINARY] [section.key=value ...]
set -euo pipefail
octet=${1:-build/octet}
shift || true
runs=$(mktemp -d /tmp/octet_lm_8bit.XXXXXX)
common=(optimizer.name=adam optimizer.lr=0.003 schedule.name=plateau schedule.gamma=0.25 log.progress=false
        "checkpoint.dir=$runs" "$@")
for cfg in "adam32_stable model.embedding=stable optimizer.state_bits=32" \
           "adam8_stable model.embedding=stable optimizer.state_bits=8" \
           "adam32_plain model.embedding=plain optimizer.state_bits=32" \
           "adam8_plain model.embedding=plain optimizer.state_bits=8"; do
  set -- $cfg
  name=$1
  shift
  "$octet" train recipes/lstm_lm_tiny.yaml "${common[@]}" "log.run_name=$name" "$@" > "$runs/$name.out" 2>&1
  grep -E "optimizer adam|epoch [0-9]+/[0-9]+:" "$runs/$name.out" | sed "s/^.*\] /$name: /"
  "$octet" eval "$runs/$name" --threads 2 2>/dev/null | grep -v "\[info\]" | sed "s|^$runs/||"
done
echo "runs in $runs"
