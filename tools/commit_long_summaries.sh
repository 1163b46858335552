#!/usr/bin/env bash
# Commits issue 61's long studies as they run: each summary the pinned
# checkout's tools/long_studies.sh has refreshed (PINNED_CHECKOUT/results/
# <study>) is copied here, under the study's lock, and its report is written
# again by this checkout's code (`pipelines.study --report_only`), the code
# `make check-results` compares it with; the runs stay the pinned commit's.
#
#   bash tools/commit_long_summaries.sh PINNED_CHECKOUT
#
# A study the pinned checkout has not started is left out, and so is one
# with no new run (its report written again differs only in the names of
# its hparams event files); nothing new to commit is not an error. Only the
# studies' folders are committed (other staged changes stay staged), with
# each committed budget table (results/long_studies/*_budgets.md) that
# names one of them, made again from the new summary by
# `pipelines.compare_budgets` on the table's own metrics (BudgetTablesTest
# compares them). A report or table that cannot be written is named in one
# line (exit 1), and the folders and tables put back as committed.
set -euo pipefail
PINNED=$(cd "${1:?usage: bash tools/commit_long_summaries.sh PINNED_CHECKOUT}" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p results
paths=()
# The studies tools/long_studies.sh runs, from the commands it prints.
studies=$(bash tools/long_studies.sh --print |
  sed -n 's|.*--study_dir=runs/\([^ ]*\).*|\1|p')
[ -n "$studies" ] || { echo "commit_long_summaries: tools/long_studies.sh" \
  "--print named no study." >&2; exit 1; }
for study in $studies; do
  src=$PINNED/results/$study
  [ -f "$src/study.json" ] || continue
  flock "$src" sh -c "rm -rf 'results/$study' && cp -r '$src' 'results/$study'"
  if ! out=$(nice -n 19 .venv/bin/python -m pipelines.study --report_only \
      --study_dir="results/$study" 2>&1); then
    rm -rf "results/$study"
    git checkout -q HEAD -- "results/$study" 2> /dev/null || true
    echo "commit_long_summaries: results/$study: --report_only failed:" \
      "$(printf '%s\n' "$out" | tail -n 1)" >&2
    exit 1
  fi
  git add -A "results/$study"
  # A report written again from the same runs differs only in its hparams
  # event files' names (a time in each): nothing to commit.
  if ! git diff --cached --name-only --no-renames -- "results/$study" |
      grep -qv '\.study_hparams$'; then
    git reset -q -- "results/$study"
    rm -rf "results/$study"
    git checkout -q HEAD -- "results/$study"
    continue
  fi
  paths+=("results/$study")
done
# The committed budget tables that read a study copied above.
studies_copied=" ${paths[*]-} "
for table in results/long_studies/*_budgets.md; do
  [ -f "$table" ] || continue
  names=$(sed -n '1s|^Long: \([^ ;]*\); short: \([^ ]*\)\.$|\1 \2|p' "$table")
  [ -n "$names" ] || continue
  long=${names% *} short=${names#* }
  case "$studies_copied" in
    *" $long "*|*" $short "*) ;;
    *) continue ;;
  esac
  metrics=$(sed -n 's|^## \([^ ]*\)$|\1|p' "$table" | paste -sd, -)
  if ! out=$(nice -n 19 .venv/bin/python -m pipelines.compare_budgets \
      --long_study="$long" --short_study="$short" --metrics="$metrics" \
      --output="$table" 2>&1 > /dev/null); then
    git checkout -q HEAD -- "$table"
    for path in ${paths[@]+"${paths[@]}"}; do
      git reset -q -- "$path"
      rm -rf "$path"
      git checkout -q HEAD -- "$path" 2> /dev/null || true
    done
    echo "commit_long_summaries: $table: compare_budgets failed:" \
      "$(printf '%s\n' "$out" | tail -n 1)" >&2
    exit 1
  fi
  git add "$table"
  paths+=("$table")
done
if [ ${#paths[@]} -eq 0 ] || git diff --cached --quiet -- "${paths[@]}"; then
  echo "commit_long_summaries: nothing new to commit."
  exit 0
fi
git commit -qm "Issue 61: the converged studies so far (runs by $(git -C "$PINNED" rev-parse --short=7 HEAD), reports by this code; they go on with --from_summary)" -- "${paths[@]}"
git log --oneline -1
