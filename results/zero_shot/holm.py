r"""Paired seed t-tests of the zero-shot remedies, Holm-adjusted.

  PYTHONPATH=. .venv/bin/python results/zero_shot/holm.py SET BASE \
      REMEDY...

SET names the table (results/zero_shot/holm.SET.md); BASE is the run name
of the untreated text class encoder (runs/zero_shot/BASE.seed{0,1,2}),
each REMEDY another run name. The cosine baseline (the untrained MiniLM
cosine of the instance and the class text, `zero_shot_baselines`) is
computed on BASE's test split and class texts.
Each remedy is compared, on unseen Top-5 and on H, with the untreated
encoder (paired by seed) and with the untrained cosine (a constant):
per-seed differences, their mean with the 95% t interval over seeds, the
two-sided seed t-test's p (`study.significance.seed_t_test`) and p
Holm-adjusted over the whole family of the set (`study.significance.holm`).
"""

import math
import sys

import numpy as np

from rank4class_tf.ranking import gzsl
from rank4class_tf.study import compare
from rank4class_tf.study import significance
from rank4class_tf.training import zero_shot_fit

METRICS = ("seen_top1", "unseen_top5", "gzsl_h")


def values(name):
  runs = [f"runs/zero_shot/{name}.seed{s}" for s in (0, 1, 2)]
  per_run = [zero_shot_fit.gzsl_values(r, METRICS) for r in runs]
  return {m: np.array([v[m] for v in per_run]) for m in METRICS}


def main(argv):
  set_name, base, remedies = argv[1], argv[2], argv[3:]
  model_dir = f"runs/zero_shot/{base}.seed0"
  run = zero_shot_fit.run_scores(model_dir, "test", cosine=True)
  cosine = gzsl.gzsl_metrics(run["labels"], run["cosine"], run["seen"],
                             METRICS)
  print(f"cosine on {model_dir}'s test split: {cosine}")
  base_values = values(base)
  rows = []
  for remedy in remedies:
    got = values(remedy)
    for metric in ("unseen_top5", "gzsl_h"):
      for against, reference in ((base, base_values[metric]),
                                 ("cosine", np.full(3, cosine[metric]))):
        diff = got[metric] - reference
        p, _ = significance.seed_t_test(diff[:, None])
        rows.append((remedy, metric, against, diff, float(p)))
  adjusted = significance.holm([r[-1] for r in rows])
  lines = ["| remedy | metric | against | difference (mean ± std [95% t]) "
           "| p | p Holm |", "|---|---|---|---|---|---|"]
  for (remedy, metric, against, diff, p), p_holm in zip(rows, adjusted):
    mean, std, low, high = compare.seed_interval(diff)
    interval = "" if math.isnan(low) else f" [{low:+.4f}, {high:+.4f}]"
    lines.append(f"| {remedy} | {metric} | {against} | {mean:+.4f} ± "
                 f"{std:.4f}{interval} | {p:.4f} | {p_holm:.4f} |")
  text = "\n".join(lines)
  print(text)
  with open(f"results/zero_shot/holm.{set_name}.md", "w") as f:
    f.write(text + "\n")


if __name__ == "__main__":
  main(sys.argv)
