"""The report's figures (matplotlib, Agg): effects against softmax + dot
with their intervals, the paper's effects beside ours, and the chosen runs'
validation curves."""

import os
import textwrap
from typing import Dict, List, Optional, Sequence

import numpy as np

from rank4class_tf import fileio
from rank4class_tf.ranking import metrics
from rank4class_tf.study import common as common_lib
from rank4class_tf.study import grid as study_grid
from rank4class_tf.study import paper_tables
from rank4class_tf.study import selection as selection_lib


def write_figures(
    folder: str,
    cells: Sequence[selection_lib.Cell],
    records: Sequence[Dict],
    chosen: Dict,
    metric_names: Sequence[str],
    statistics: selection_lib.Statistics,
    select_metric: str,
    paper: Sequence[paper_tables.PaperTable] = ()) -> List[str]:
  """The report's figures (PNG, deterministic bytes):

  * `effects.png`, the main figure: every cell's paired difference from
    softmax + dot, one panel per metric, with its 95% hierarchical interval
    (filled: resolved, Holm p < 0.05 in both tests); a colour per
    interaction and a marker per loss, the same in every figure and study;
  * `paper_effects.png` (with a paper table): our effects against each of
    the paper's tables (the first filled, the second open; each axis its
    own range), the diagonal where they would agree;
  * `<metric>.png`: each cell's test mean with its hierarchical interval,
    bars from 0;
  * `validation_curves.png`: every run's validation curve, one panel per
    cell with its own y-range, a colour per learning rate and a line style
    per width.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  try:
    fileio.makedirs(folder)
  except OSError as e:
    raise ValueError(f"cannot write {folder}: {e.strerror or e}.") from None
  paths = []
  losses_axis = common_lib.axis(c.loss for c in cells)
  interactions_axis = common_lib.axis(c.interaction for c in cells)
  colours = plt.get_cmap("tab10")
  by_key = {c.key: c for c in cells}
  if study_grid.BASELINE in by_key and len(cells) > 1:
    paths.append(_effects_figure(folder, plt, cells, metric_names,
                                 statistics))
    if paper:
      path = _paper_figure(folder, plt, cells, metric_names, statistics,
                           paper)
      if path:
        paths.append(path)
  for metric in metric_names:
    fig, ax = plt.subplots(figsize=(max(6.4, 1.2 + 0.45 * len(cells)), 4.6))
    width = 0.8 / max(1, len(losses_axis))
    for j, loss in enumerate(losses_axis):
      xs, means, errors = [], [], [[], []]
      for i, interaction in enumerate(interactions_axis):
        cell = by_key.get((loss, interaction))
        if cell is None:
          continue
        mean = cell.mean(metric)
        lo, hi = statistics.intervals[cell.key][metric]
        xs.append(i - 0.4 + width * (j + 0.5))
        means.append(mean)
        errors[0].append(max(0., mean - lo))
        errors[1].append(max(0., hi - mean))
      ax.bar(xs, means, width, yerr=errors, capsize=3, color=colours(j),
             label=common_lib.loss_title(loss))
    baseline = by_key.get(study_grid.BASELINE)
    if baseline is not None:
      ax.axhline(baseline.mean(metric), color="black", lw=0.8, ls="--",
                 label="softmax + dot")
    ax.set_xticks(range(len(interactions_axis)))
    ax.set_xticklabels([common_lib.INTERACTION_TITLES.get(i, i)
                        for i in interactions_axis])
    ax.set_ylim(0., 1.05)  # From 0: bar lengths are the values.
    ax.set_ylabel(f"test {common_lib.metric_title(metric)}")
    ax.set_title(
        f"Test {common_lib.metric_title(metric)} of each cell (bars from 0; "
        "95% hierarchical intervals:\nseeds and test instances "
        "resampled). The differences: effects.png",
        fontsize=9)
    ax.legend(fontsize=7, ncol=3, loc="upper center",
              bbox_to_anchor=(0.5, -0.1))
    fig.tight_layout()
    path = os.path.join(folder, f"{metric.replace('@', '_at_')}.png")
    _save(fig, plt, path, dpi=110)
    paths.append(path)
  paths.append(_curves_figure(folder, plt, records, chosen, cells,
                              select_metric))
  return paths


def _save(fig, plt, path: str, dpi: int) -> None:
  """Writes a figure atomically with no date or version in its bytes."""
  try:
    common_lib.write(path, lambda f: fig.savefig(f, format="png", dpi=dpi,
                                       metadata={"Software": None}),
           binary=True)
  finally:
    plt.close(fig)


# The mean width of a character of matplotlib's default font (DejaVu Sans),
# in ems, with a margin: what a figure's width holds of its title.
EM_PER_CHARACTER = 0.6


def wrapped_suptitle(fig, text: str, fontsize: int, top: float) -> float:
  """Sets the figure's title, each line wrapped to the figure's width, and
  returns the top of the panels' area (for `tight_layout`'s rect): `top`,
  lowered by a line for each line the wrapping added. A study of one or two
  cells (or a report of one or two metrics) draws narrow figures, which
  would otherwise cut a long title at both edges; a wide figure's title
  and layout are as they were."""
  width = int(fig.get_figwidth() * 72 / (EM_PER_CHARACTER * fontsize))
  lines = text.split("\n")
  wrapped = [part for line in lines for part in textwrap.wrap(line, width)]
  fig.suptitle("\n".join(wrapped), fontsize=fontsize)
  added = len(wrapped) - len(lines)
  return top - added * 1.4 * fontsize / 72 / fig.get_figheight()


# One colour per interaction and one marker per loss in every figure of
# every study, so that the figures of two reports read alike.
INTERACTION_ORDER = ("dot", "lc_mlp", "concat_mlp")
LOSS_MARKERS = {"softmax": "o", "pairwise_logistic": "s", "approx_ndcg": "^",
                "gumbel_approx_ndcg": "v", "mse": "D"}
EXTRA_MARKERS = ("P", "X", "*", "h", "<", ">")
TABLE_FACES = ("full", "none")  # The paper's first table filled, then open.


def interaction_colour(plt, interaction: str):
  """tab10 by the interaction's place in INTERACTION_ORDER (others after)."""
  order = list(INTERACTION_ORDER)
  index = (order.index(interaction) if interaction in order else
           len(order) + sum(map(ord, interaction)) % (10 - len(order)))
  return plt.get_cmap("tab10")(index)


def loss_marker(loss: str) -> str:
  base, sorter = study_grid.split_loss(loss)
  if sorter is None and base in LOSS_MARKERS:
    return LOSS_MARKERS[base]
  return EXTRA_MARKERS[sum(map(ord, loss)) % len(EXTRA_MARKERS)]


def _style_legend(plt, cells) -> List:
  """Legend handles: a colour per interaction, a marker per loss."""
  order = lambda names, known: sorted(
      names, key=lambda n: (list(known).index(n) if n in known else
                            len(known), n))
  interactions = order(common_lib.axis(c.interaction for c in cells),
                       INTERACTION_ORDER)
  losses = order(common_lib.axis(c.loss for c in cells), LOSS_MARKERS)
  handles = [plt.Line2D([], [], color=interaction_colour(plt, i), lw=2,
                        label=common_lib.INTERACTION_TITLES.get(i, i))
             for i in interactions]
  handles += [plt.Line2D([], [], color="grey", marker=loss_marker(l), ls="",
                         label=common_lib.loss_title(l)) for l in losses]
  return handles


def _effects_figure(folder, plt, cells, metric_names, statistics) -> str:
  """Paired differences from softmax + dot with hierarchical intervals."""
  others = [c for c in cells if c.key != study_grid.BASELINE]
  fig, axes = plt.subplots(1, len(metric_names), squeeze=False,
                           figsize=(2.9 * len(metric_names) + 2.2,
                                    1.6 + 0.32 * len(others)), sharey=True)
  for k, metric in enumerate(metric_names):
    ax = axes[0][k]
    for y, cell in enumerate(others):
      effect = statistics.effects[(cell.key, metric)]
      colour = interaction_colour(plt, cell.interaction)
      ax.errorbar(
          [effect.delta], [y],
          xerr=[[effect.delta - effect.low], [effect.high - effect.delta]],
          fmt=loss_marker(cell.loss),
          color=colour,
          capsize=2,
          ms=4,
          mfc=colour if effect.resolved else "white")
    ax.axvline(0., color="black", lw=0.8)
    ax.set_title(f"Δ {common_lib.metric_title(metric)}", fontsize=9)
    ax.tick_params(labelsize=7)
    ax.grid(axis="x", lw=0.3)
  axes[0][0].set_yticks(range(len(others)))
  axes[0][0].set_yticklabels([common_lib.cell_title(c.key) for c in others],
                             fontsize=7)
  axes[0][0].invert_yaxis()
  handles = _style_legend(plt, others)
  fig.legend(handles=handles, loc="lower center", ncol=min(8, len(handles)),
             fontsize=7)
  top = wrapped_suptitle(
      fig, "Each cell minus softmax + dot: 95% hierarchical intervals (seeds "
      "and test instances resampled);\nfilled: resolved (Holm p < "
      f"{selection_lib.ALPHA} in the bootstrap and the seed-level t-test)",
      9, 0.93)
  rows = -(-len(handles) // 8)
  fig.tight_layout(rect=(0, 0.25 * rows / (1.6 + 0.32 * len(others)), 1,
                         top))
  path = os.path.join(folder, "effects.png")
  _save(fig, plt, path, dpi=110)
  return path


def _paper_figure(folder, plt, cells, metric_names, statistics,
                  tables: Sequence[paper_tables.PaperTable]) -> Optional[str]:
  """Our effects (y, with intervals) against each paper table's (x): a
  colour per interaction, a marker per loss; the first table's points
  filled, the second's open."""
  shown = [m for m in metric_names if any(t.effects(m) for t in tables)]
  if not shown:
    return None
  fig, axes = plt.subplots(1, len(shown), squeeze=False,
                           figsize=(3.6 * len(shown), 4.2))
  for k, metric in enumerate(shown):
    ax = axes[0][k]
    xs, ys = [], []
    for t, table in enumerate(tables[:len(TABLE_FACES)]):
      theirs = table.effects(metric)
      for cell in cells:
        paper = theirs.get((cell.interaction, cell.loss))
        if cell.key == study_grid.BASELINE or paper is None:
          continue
        effect = statistics.effects[(cell.key, metric)]
        colour = interaction_colour(plt, cell.interaction)
        ax.errorbar([paper], [effect.delta],
                    yerr=[[effect.delta - effect.low],
                          [effect.high - effect.delta]],
                    fmt=loss_marker(cell.loss), ms=4, capsize=2, lw=0.8,
                    color=colour,
                    mfc=colour if TABLE_FACES[t] == "full" else "white")
        xs.append(paper)
        ys += [effect.low, effect.high]
    if xs:
      # Each axis its own range (the paper's effects are smaller than our
      # intervals); the diagonal where the two would agree.
      xlim = max(abs(v) for v in xs) * 1.2 + 1e-4
      ylim = max(abs(v) for v in ys) * 1.1 + 1e-4
      ax.plot([-xlim, xlim], [-xlim, xlim], color="grey", lw=0.6, ls="--")
      ax.set_xlim(-xlim, xlim)
      ax.set_ylim(-ylim, ylim)
    ax.axhline(0., color="black", lw=0.6)
    ax.axvline(0., color="black", lw=0.6)
    ax.set_xlabel(f"paper's Δ {common_lib.metric_title(metric)}", fontsize=8)
    ax.set_ylabel(f"our Δ {common_lib.metric_title(metric)}", fontsize=8)
    ax.tick_params(labelsize=7)
  handles = _style_legend(plt, [c for c in cells
                                if c.key != study_grid.BASELINE])
  names = [table.source.split(", ")[-1] for table in tables]
  handles += [plt.Line2D([], [], color="black", marker="o", ls="",
                         mfc="black" if face == "full" else "white",
                         label=f"{name} ({table.title})")
              for name, table, face in zip(names, tables, TABLE_FACES)]
  fig.legend(handles=handles, loc="lower center", ncol=min(6, len(handles)),
             fontsize=7)
  top = wrapped_suptitle(
      fig, "Effects against softmax + dot: ours against the paper's "
      f"{' and '.join(names[:len(TABLE_FACES)])}; same sign in the "
      "upper-right and lower-left quadrants", 9, 0.93)
  rows = -(-len(handles) // 6)
  fig.tight_layout(rect=(0, 0.06 * rows, 1, top))
  path = os.path.join(folder, "paper_effects.png")
  _save(fig, plt, path, dpi=110)
  return path


LINE_STYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)),
               (0, (1, 3)), (0, (8, 2)))


def _curves_figure(folder, plt, records, chosen, cells,
                   select_metric) -> str:
  """One panel per cell (its own y-range, at least 280 px high): every
  run's validation curve, a colour per learning rate (from low, dark, to
  high, light) and a line style per width, the chosen ones bold; one
  legend entry per rate and per width, not per combination."""
  tag = metrics.keras_name(select_metric)
  chosen_runs = {r["run"] for r in chosen.values()}
  rates = sorted({r["learning_rate"] for r in records})
  widths = sorted({r["mlp_units"] for r in records if r["mlp_units"]})
  cmap = plt.get_cmap("viridis")
  rate_colour = {rate: cmap(0.9 * i / max(1, len(rates) - 1))
                 for i, rate in enumerate(rates)}
  width_style = {units: LINE_STYLES[i % len(LINE_STYLES)]
                 for i, units in enumerate(widths)}
  keys = [c.key for c in cells] or common_lib.axis((r["loss"], r["interaction"])
                                         for r in records)
  cols = min(5, len(keys))
  rows = -(-len(keys) // cols)
  fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.9 * rows + 1.0),
                           squeeze=False)
  for index, key in enumerate(keys):
    ax = axes[index // cols][index % cols]
    for r in records:
      if (r["loss"], r["interaction"]) != key:
        continue
      curve = np.array(r["validation_curve"].get(tag, []), np.float64)
      if not len(curve):
        continue
      bold = r["run"] in chosen_runs
      ax.plot(curve[:, 0], curve[:, 1],
              color=rate_colour[r["learning_rate"]],
              ls=width_style.get(r["mlp_units"], "-"),
              lw=1.8 if bold else 0.7, alpha=1.0 if bold else 0.6)
    ax.set_title(common_lib.cell_title(key), fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_xlabel("training step", fontsize=7)
    ax.set_ylabel(f"validation {common_lib.metric_title(select_metric)}",
                  fontsize=7)
  for index in range(len(keys), rows * cols):  # No empty panels.
    axes[index // cols][index % cols].axis("off")
  handles = [_legend_line(plt, rate_colour[rate],
                          f"lr {study_grid.rate_text(rate)}")
             for rate in rates]
  handles += [plt.Line2D([], [], color="black", ls=width_style[units],
                         label=f"width {units}") for units in widths]
  fig.legend(handles=handles, loc="lower center", ncol=min(8, len(handles)),
             fontsize=7)
  top = wrapped_suptitle(
      fig, "Validation curves of every run (bold: the chosen run of each "
      "seed; each panel its own y-range; colour: learning rate, line: MLP "
      "width)", 9, 0.96)
  legend_rows = -(-len(handles) // 8)
  fig.tight_layout(rect=(0, 0.03 + 0.1 * legend_rows / rows, 1, top))
  path = os.path.join(folder, "validation_curves.png")
  _save(fig, plt, path, dpi=100)
  return path


def _legend_line(plt, colour, label):
  """A legend entry: a line of `colour`."""
  return plt.Line2D([], [], color=colour, label=label)
