#!/usr/bin/env bash
# Issue 61's two converged studies, one after the other, from a checkout
# pinned to one commit (docs/text.md, "Trained until they stop improving"):
#
#   1. results/study_goemotions_frozen_long: the frozen study's grid (5 losses
#      x 3 interactions, rates 1e-4 ... 1e-2, widths 64 ... 512, tuned on
#      seed 0, seeds 1 and 2 at the choices) trained under --patience=5 to a
#      ceiling of 30,000 steps, validation every 1,000;
#   2. results/study_goemotions_finetuned_long: fine-tuned MiniLM, 6 cells,
#      rates 1e-5 and 3e-5 with linear warmup (3,000 steps) and decay to the
#      30,000-step ceiling, --patience=5.
#
#   setsid nohup bash tools/long_studies.sh PINNED_CHECKOUT > /dev/null 2>&1 &
#
# runs them in PINNED_CHECKOUT (a `git worktree add --detach DIR COMMIT` of
# PINNED_COMMIT below, with its .venv), under `nice -n 19` (they yield the
# CPU to everything else), logging to PINNED_CHECKOUT/runs/long_studies.log.
# Each study's folder is PINNED_CHECKOUT/runs/<study>; its summary
# (`--summary_dir`) is PINNED_CHECKOUT/results/<study>, refreshed every
# SUMMARY_EVERY seconds (default 1800) while the study runs
# (`--report_only --summary_dir`), for a repository to copy and commit.
# The same command resumes: a study folder already there goes on; on a new
# machine, where runs/ is empty, a summary committed in this script's own
# checkout (results/<study>, or SUMMARIES=DIR) is copied to the pinned
# checkout's results/ and the study starts from it (`--from_summary`),
# training only what is missing. A finished study's command trains nothing
# and rewrites its report and summary.
#
#   bash tools/long_studies.sh --print
#
# prints the two study commands (as docs/text.md shows them) and exits.
#
#   WORKERS=2 setsid nohup bash tools/long_studies.sh PINNED_CHECKOUT ...
#
# starts each study command WORKERS times (default 1), the workers sharing
# its runs (docs/study.md, "Many workers"), each with an equal share of the
# cores as TensorFlow threads (THREADS, default cores / WORKERS:
# TF_NUM_INTRAOP_THREADS and TF_NUM_INTEROP_THREADS); worker k > 1 logs to
# runs/long_studies.worker<k>.log. On 2 cores, two fine-tuning workers of
# one thread train 1.25x the steps a second of one worker on both
# (benchmarks/text_workers.py, results/text_workers/benchmark.md).
#
# The body is one block read whole before it runs, so that editing or
# replacing this file (a checkout moving on) never changes a running study.
{
set -u
PINNED_COMMIT=5d93f13ff88bb8a3ca11d32db8e470d4800f54db
STUDIES=(study_goemotions_frozen_long study_goemotions_finetuned_long)

study_flags() {
  case "$1" in
    study_goemotions_frozen_long) echo \
      --dataset=goemotions --encoder=bert --init_checkpoint=minilm \
      --freeze_encoder --feature_cache_dir=runs/feature_cache \
      --export=false --keep_checkpoints=1 \
      --learning_rates=1e-4,3e-4,1e-3,3e-3,1e-2 --mlp_units=64,128,256,512 \
      --choose_on_seed=0 --extend_grid=3 --extend_steps=2 \
      --batch_size=64 --max_seq_length=32 --train_steps=30000 \
      --eval_every=1000 --patience=5 --deterministic ;;
    study_goemotions_finetuned_long) echo \
      --dataset=goemotions --encoder=bert --init_checkpoint=minilm \
      --pooling=mean \
      --cells=softmax.dot,pairwise_logistic.dot,approx_ndcg.dot,gumbel_approx_ndcg.dot,approx_ndcg.lc_mlp,pairwise_logistic.concat_mlp \
      --choose_on_seed=0 --learning_rates=1e-5,3e-5 --mlp_units=64,256 \
      --lr_schedule=linear --warmup_steps=3000 --extend_grid=1 \
      --batch_size=32 --max_seq_length=32 --train_steps=30000 \
      --eval_every=1000 --patience=5 --deterministic --export=false \
      --keep_checkpoints=1 ;;
  esac
}

# The study command; with --from_summary where the summary is there.
study_command() {
  local from=""
  if [ "${2:-}" = from ]; then
    from="--from_summary=results/$1 "
  fi
  echo ".venv/bin/python -m pipelines.study --study_dir=runs/$1" \
    "${from}--summary_dir=results/$1 $(study_flags "$1")"
}

if [ "${1:-}" = --print ]; then
  for study in "${STUDIES[@]}"; do
    study_command "$study" from
  done
  exit 0
fi

WORKERS=${WORKERS:-1}
if ! [[ "$WORKERS" =~ ^[1-9][0-9]*$ ]]; then
  echo "long_studies: WORKERS=$WORKERS is not a whole number of 1 or more." >&2
  exit 1
fi
if [ -z "${THREADS:-}" ]; then
  THREADS=$(( $(nproc) / WORKERS ))
  [ "$THREADS" -ge 1 ] || THREADS=1  # More workers than cores.
elif ! [[ "$THREADS" =~ ^[1-9][0-9]*$ ]]; then
  echo "long_studies: THREADS=$THREADS is not a whole number of 1 or more." >&2
  exit 1
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUMMARIES=${SUMMARIES:-$HERE/results}
SUMMARY_EVERY=${SUMMARY_EVERY:-1800}
ROOT=${1:?usage: bash tools/long_studies.sh PINNED_CHECKOUT (or --print)}
# `nice` orders processes within one autogroup; started with setsid, the
# script leads a session, whose autogroup the kernel shares equally with
# every other session's: the group's own nice makes the studies yield
# (Linux autogroup scheduling; a no-op where there is none).
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ]; then
  echo 19 > /proc/self/autogroup 2>/dev/null || true
fi
cd "$ROOT" || exit 1
ROOT=$(pwd)
export PYTHONPATH=$ROOT  # the pinned code, never the venv's own checkout
mkdir -p runs
LOG=runs/long_studies.log
say() { echo "$(date '+%F %T') long_studies: $*" >> "$LOG"; }

# The pinned checkout: its commit, no change to a tracked file.
head=$(git rev-parse HEAD)
if [ "$head" != "$PINNED_COMMIT" ] || [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  say "$ROOT is at $head (or changed), not the pinned $PINNED_COMMIT: stopped."
  exit 1
fi
say "start in $ROOT at $head (pid $$)"
mkdir -p results

# Every SUMMARY_EVERY seconds, the running study's summary, rewritten from
# its finished runs (TensorFlow's lines in runs/long_studies.summary.log);
# where that fails, the log line ends with the study's one-line reason.
refresh_summaries() {
  local study=$1 status
  while sleep "$SUMMARY_EVERY"; do
    nice -n 19 .venv/bin/python -m pipelines.study --study_dir="runs/$study" \
      --report_only --summary_dir="results/$study" \
      >> runs/long_studies.summary.log 2>&1
    status=$?
    if [ "$status" -eq 0 ]; then
      say "summary results/$study refreshed (exit 0)"
    else
      say "summary results/$study not refreshed (exit $status):" \
        "$(tail -n 1 runs/long_studies.summary.log)"
    fi
  done
}

# The command "$@" started WORKERS times under `nice -n 19` (with more than
# one, THREADS TensorFlow threads each; worker k > 1 logs to
# runs/long_studies.worker<k>.log); returns the first non-zero exit of a
# worker, in the order they were started, or 0.
run_workers() {
  local w log code status=0
  local pids=() threads=()
  if [ "$WORKERS" -gt 1 ]; then
    threads=(env "TF_NUM_INTRAOP_THREADS=$THREADS"
             "TF_NUM_INTEROP_THREADS=$THREADS")
  fi
  for ((w = 1; w <= WORKERS; w++)); do
    log=$LOG
    if [ "$w" -gt 1 ]; then
      log=runs/long_studies.worker$w.log
    fi
    "${threads[@]}" nice -n 19 "$@" >> "$log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid"
    code=$?
    if [ "$status" -eq 0 ]; then
      status=$code
    fi
  done
  return "$status"
}

for study in "${STUDIES[@]}"; do
  if [ ! -e "runs/$study/study.json" ] && [ ! -e "results/$study/study.json" ] \
      && [ -f "$SUMMARIES/$study/study.json" ]; then
    rm -rf "results/$study"
    cp -r "$SUMMARIES/$study" "results/$study"
    say "copied the committed summary $SUMMARIES/$study to results/$study"
  fi
  from=""
  if [ ! -e "runs/$study/study.json" ] && [ -f "results/$study/study.json" ]; then
    from=from
  fi
  command=$(study_command "$study" $from)
  if [ "$WORKERS" -gt 1 ]; then
    say "$study: $WORKERS workers, $THREADS TensorFlow thread(s) each:" \
      "nice -n 19 $command"
  else
    say "$study: nice -n 19 $command"
  fi
  refresh_summaries "$study" &
  refresher=$!
  # shellcheck disable=SC2086  # the flags are words.
  run_workers $command
  status=$?
  kill "$refresher" 2> /dev/null
  wait "$refresher" 2> /dev/null
  say "$study: exit $status"
done
say "done"
exit 0
}
