"""Tests of rank4class_tf.study.figures: a narrow figure (a study of one or
two cells, such as the README's walkthrough or a long study's first runs)
keeps its whole title inside the image."""

import os
import tempfile

import numpy as np
import tensorflow as tf

from rank4class_tf.study import figures

TITLE = ("Validation curves of every run (bold: the chosen run of each seed; "
         "each panel its own y-range; colour: learning rate, line: MLP "
         "width)")


def _records(cells):
  return [{"run": f"{loss}.{interaction}.lr0.001.seed0", "loss": loss,
           "interaction": interaction, "learning_rate": 1e-3,
           "mlp_units": None, "seed": 0,
           "validation_curve": {"top1_accuracy": [[1000, 0.5], [2000, 0.6],
                                                  [3000, 0.62]]}}
          for loss, interaction in cells]


def _ink(path):
  """The image's pixels that are not white (True), rows by columns."""
  from matplotlib import image  # pylint: disable=g-import-not-at-top
  pixels = image.imread(path)[..., :3]
  return (pixels < 0.9).any(axis=-1)


def _title(fig):
  """The figure's title (matplotlib has no public getter of the artist)."""
  return fig._suptitle  # pylint: disable=protected-access


class TitleTest(tf.test.TestCase):

  def _figure(self, width, height=3.9):
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
    fig = plt.figure(figsize=(width, height))
    self.addCleanup(plt.close, fig)
    return fig

  def _extent(self, fig):
    fig.canvas.draw()
    box = _title(fig).get_window_extent(fig.canvas.get_renderer())
    return box, fig.bbox

  def test_a_narrow_figure_wraps_its_title_inside_its_width(self):
    # Two panels of 3.4 inches: 6.8 * 72 / (0.6 * 9) = 90 characters a
    # line, so the 135-character title takes two lines, lowering the
    # panels' top by one line of 1.4 * 9 points in a 3.9-inch figure.
    fig = self._figure(6.8)
    top = figures.wrapped_suptitle(fig, TITLE, 9, 0.96)
    self.assertAllClose(top, 0.96 - 1.4 * 9 / 72 / 3.9)
    text = _title(fig).get_text()
    self.assertEqual(text.replace("\n", " "), TITLE)
    self.assertLen(text.split("\n"), 2)
    self.assertTrue(all(len(line) <= 90 for line in text.split("\n")))
    box, bounds = self._extent(fig)
    self.assertGreater(box.x0, bounds.x0)
    self.assertLess(box.x1, bounds.x1)
    # The same title unwrapped runs past both edges: what the test guards.
    fig.suptitle(TITLE, fontsize=9)
    box, bounds = self._extent(fig)
    self.assertLess(box.x0, bounds.x0)
    self.assertGreater(box.x1, bounds.x1)

  def test_a_wide_figure_keeps_its_title_and_layout(self):
    # Five panels: one line, and the top the caller gave, so the committed
    # reports' wide figures are drawn to the same bytes as before.
    fig = self._figure(17.0)
    self.assertEqual(figures.wrapped_suptitle(fig, TITLE, 9, 0.96), 0.96)
    self.assertEqual(_title(fig).get_text(), TITLE)
    # A line break of the caller's own is kept and not counted as added.
    fig = self._figure(13.8)
    self.assertEqual(figures.wrapped_suptitle(fig, "a b;\nc d", 9, 0.93),
                     0.93)
    self.assertEqual(_title(fig).get_text(), "a b;\nc d")

  def test_the_curves_of_a_two_cell_study_keep_their_title_inside(self):
    folder = tempfile.mkdtemp()
    paths = figures.write_figures(
        folder, [], _records([("softmax", "dot"), ("approx_ndcg", "dot")]),
        {}, [], None, "top1_accuracy")
    self.assertEqual(paths, [os.path.join(folder, "validation_curves.png")])
    ink = _ink(paths[0])
    # The title is the image's first ink, above the panels: its rows touch
    # neither the left nor the right edge.
    rows = np.flatnonzero(ink.any(axis=1))
    band = ink[rows[0]:rows[0] + 12]
    self.assertTrue(band.any())
    self.assertFalse(band[:, :3].any())
    self.assertFalse(band[:, -3:].any())


if __name__ == "__main__":
  tf.test.main()
