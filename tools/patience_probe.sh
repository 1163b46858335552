#!/usr/bin/env bash
# Issue 61's patience probe: does `--patience=5` (validation every 1,000
# steps) stop a run that would still have improved, and would waiting
# longer change a verdict? (docs/text.md, "Is patience 5 long enough?")
#
#   bash tools/patience_probe.sh [OUT]
#
# trains, in this checkout, the probe (frozen MiniLM from the feature
# cache, `dot`, learning rate 3e-3, batch 64, 32 tokens, --deterministic):
# softmax CE and ApproxNDCG, seeds 0, 1 and 2, each twice:
#
#   OUT/<loss>.full.seed<k>   every one of the 30,000 steps (no patience),
#   OUT/<loss>.p5.seed<k>     the long study's rule: --patience=5, 30,000
#                             the ceiling.
#
# OUT defaults to runs/patience_probe; the feature cache is
# ${FEATURE_CACHE:-runs/feature_cache} (built on the first run, ~10 min,
# or copied from a long study's). The same command goes on after a stop: a
# finished run is left as it is, an interrupted one resumes. Then
#
#   .venv/bin/python tools/patience_probe.py OUT
#
# prints the comparison (results/long_studies/patience_probe.md).
set -eu
OUT=${1:-runs/patience_probe}
CACHE=${FEATURE_CACHE:-runs/feature_cache}
COMMON=(--dataset=goemotions --encoder=bert --init_checkpoint=minilm
        --freeze_encoder --feature_cache_dir="$CACHE" --interaction=dot
        --learning_rate=3e-3 --batch_size=64 --max_seq_length=32
        --train_steps=30000 --eval_every=1000 --deterministic
        --export=false --keep_checkpoints=1)
for loss in softmax approx_ndcg; do
  for seed in 0 1 2; do
    .venv/bin/python -m pipelines.train "${COMMON[@]}" --loss="$loss" \
        --seed="$seed" --model_dir="$OUT/$loss.full.seed$seed"
    .venv/bin/python -m pipelines.train "${COMMON[@]}" --loss="$loss" \
        --seed="$seed" --patience=5 --model_dir="$OUT/$loss.p5.seed$seed"
  done
done
