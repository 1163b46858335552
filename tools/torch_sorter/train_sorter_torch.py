r"""Trains a SoDeep sorter with PyTorch on a GPU, for import into rank4class_tf.

Why PyTorch: the GPU machines this project is lent run PyTorch and have no
TensorFlow, and a TensorFlow wheel (over 500 MB) cannot travel to them. This
script is the sorter-pretraining loop of `rank4class_tf.sorting.training`
(L1, Adam, learning rate halved every N vectors, validation curve) over the
same four families of synthetic vectors, with sorters whose layers are laid out
exactly like the Keras ones, so that `pipelines.import_sorter` maps the weights
one to one and checks that TensorFlow reproduces this script's outputs. It
needs only torch and numpy; it imports nothing of rank4class_tf.

The validation and test sets are read from the .npz files that
`pipelines.import_sorter --write_sets=DIR` writes (the package's fixed,
seeded sets), so the L1 printed here is the one `pipelines.evaluate_sorter`
measures after the import.

Example (on a GPU machine; the test runs a CPU version with 2 steps):

  python3 tools/torch_sorter/train_sorter_torch.py --sorter=cnn_reference \
      --seq_len=100 --sets=sets --batch_size=512 --train_vectors=50000000 \
      --halve_every_vectors=10000000 --epoch_vectors=1000000 \
      --max_seconds=1500 --output=runs/cnn_reference_d100.npz

Writes --output (.npz): the weights under their PyTorch names (`w/...`), the
record (`record`, JSON: sorter, seq_len, hyperparameters, test L1,
train_vectors, train_seconds, device, command, curve) and 16 check vectors
with the sorter's fp32 outputs (`check_inputs`, `check_outputs`). With
--checkpoint the run saves its full state there after every epoch and a rerun
of the same command resumes from it.
"""

import argparse
import contextlib
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

SORTERS = ("lstm", "cnn", "cnn_reference")
# The SoDeep reference code's CNN (technicolor-research/sodeep, model.py,
# class cnn): 9 valid convolutions, batch norm on every second one, PReLU.
REFERENCE_CHANNELS = (8, 16, 32, 64, 96, 128, 256, 256, 128)
REFERENCE_KERNELS = (2, 3, 5, 7, 10, 7, 5, 3, 3)
REFERENCE_NORMED = (1, 3, 5, 7)
NUM_CHECK = 16


def standardize(y, epsilon=1e-6):
  """(y - mean) / (population std + epsilon) per row, as `ops.standardize`."""
  mean = y.mean(dim=-1, keepdim=True)
  std = (y - mean).pow(2).mean(dim=-1, keepdim=True).sqrt()
  return (y - mean) / (std + epsilon)


class LSTMSorter(nn.Module):
  """`sorters.LSTMSorter`: BiLSTM layers, then a full or shared projection."""

  def __init__(self, d, units, num_layers, projection):
    super().__init__()
    self.d, self.units, self.projection_kind = d, units, projection
    self.lstm = nn.LSTM(1, units, num_layers, batch_first=True,
                        bidirectional=True)
    self.projection = nn.Linear(d * 2 * units if projection == "full"
                                else 2 * units,
                                d if projection == "full" else 1)

  def forward(self, y):
    h, _ = self.lstm(standardize(y)[..., None])      # [batch, d, 2 units]
    if self.projection_kind == "full":
      return self.projection(h.reshape(h.shape[0], -1))
    return self.projection(h)[..., 0]


def cnn_kernel_sizes(d, num_blocks=8):
  """`sorters.cnn_kernel_sizes`."""
  share, extra = divmod(d - 1, num_blocks)
  return tuple(1 + share + (1 if b < extra else 0) for b in range(num_blocks))


class CNNSorter(nn.Module):
  """`sorters.CNNSorter`: 8 x (conv, BN, ReLU) to one position, projection."""

  def __init__(self, d, width):
    super().__init__()
    w = width
    channels = (w, w, 2 * w, 2 * w, 4 * w, 4 * w, 4 * w, d)
    ins = (1,) + channels[:-1]
    kernels = cnn_kernel_sizes(d)
    self.convs = nn.ModuleList(nn.Conv1d(i, o, k, bias=False)
                               for i, o, k in zip(ins, channels, kernels))
    # Keras' BatchNormalization defaults: epsilon 1e-3, momentum 0.99.
    self.norms = nn.ModuleList(nn.BatchNorm1d(o, eps=1e-3, momentum=0.01)
                               for o in channels)
    self.projection = nn.Linear(d, d)

  def forward(self, y):
    x = standardize(y)[:, None, :]                    # [batch, 1, d]
    for conv, norm in zip(self.convs, self.norms):
      x = torch.relu(norm(conv(x)))
    return self.projection(x[..., 0])


class ReferenceCNNSorter(nn.Module):
  """`sorters.ReferenceCNNSorter`: the SoDeep code's CNN on standardised
  scores, sigmoid output."""

  def __init__(self, d):
    super().__init__()
    if d < 37:
      raise ValueError(f"cnn_reference needs d >= 37, not {d}.")
    ins = (1,) + REFERENCE_CHANNELS[:-1]
    self.convs = nn.ModuleList(
        nn.Conv1d(i, o, k) for i, o, k in zip(ins, REFERENCE_CHANNELS,
                                              REFERENCE_KERNELS))
    self.norms = nn.ModuleDict({
        str(b): nn.BatchNorm1d(REFERENCE_CHANNELS[b], eps=1e-5, momentum=0.1)
        for b in REFERENCE_NORMED})
    self.prelus = nn.ModuleList(nn.PReLU() for _ in REFERENCE_CHANNELS)
    self.output = nn.Conv1d(REFERENCE_CHANNELS[-1], d,
                            d - sum(k - 1 for k in REFERENCE_KERNELS))

  def forward(self, y):
    x = standardize(y)[:, None, :]
    for b, (conv, prelu) in enumerate(zip(self.convs, self.prelus)):
      x = conv(x)
      if str(b) in self.norms:
        x = self.norms[str(b)](x)
      x = prelu(x)
    return torch.sigmoid(self.output(x)[..., 0])


def build(args):
  if args.sorter == "lstm":
    return LSTMSorter(args.seq_len, args.units, args.num_layers,
                      args.projection)
  if args.sorter == "cnn":
    return CNNSorter(args.seq_len, args.width)
  return ReferenceCNNSorter(args.seq_len)


def hyperparameters(args):
  """The Keras sorter's hyper-parameters, as `sorters.get` takes them."""
  if args.sorter == "lstm":
    return {"units": args.units, "num_layers": args.num_layers,
            "projection": args.projection}
  if args.sorter == "cnn":
    return {"width": args.width}
  return {}


def exact_rank(y):
  """`ops.exact_rank`: descending positions / d, ties by index."""
  d = y.shape[-1]
  order = torch.argsort(y, dim=-1, descending=True, stable=True)
  positions = torch.arange(1, d + 1, device=y.device, dtype=y.dtype)
  ranks = torch.empty_like(y)
  ranks.scatter_(-1, order, positions.expand_as(y).contiguous())
  return ranks / d


def sample_scores(batch_size, d, generator, device):
  """The families of `synthetic.sample_scores` (uniform, normal, shuffled
  linspace, per-entry mixture with Dirichlet(1, 1, 1) proportions), drawn
  with torch's generator: the same distribution, another random stream."""
  def uniform(*shape, low=0., high=1.):
    return torch.rand(*shape, generator=generator, device=device) * (
        high - low) + low
  shape = (batch_size, d)
  uni = uniform(*shape, low=-1., high=1.)
  normal = torch.randn(*shape, generator=generator, device=device)
  ends = uniform(batch_size, 2, low=-1., high=1.)
  low = ends.min(dim=-1, keepdim=True).values
  high = ends.max(dim=-1, keepdim=True).values
  steps = torch.arange(d, device=device, dtype=torch.float32) / max(d - 1, 1)
  linspace = low + (high - low) * steps[None, :]
  shuffle = torch.argsort(uniform(*shape), dim=-1)
  linspace = torch.gather(linspace, 1, shuffle)
  gamma = -torch.log(uniform(batch_size, 3, low=1e-6, high=1.))
  cumulative = gamma.cumsum(-1) / gamma.sum(-1, keepdim=True)
  draw = uniform(*shape)
  pick = (draw[:, :, None] > cumulative[:, None, :2]).sum(-1)
  stacked = torch.stack([uni, normal, linspace], dim=-1)
  mixture = torch.gather(stacked, 2, pick[..., None])[..., 0]
  family = torch.randint(0, 4, (batch_size,), generator=generator,
                         device=device)
  candidates = torch.stack([uni, normal, linspace, mixture], dim=1)
  return candidates[torch.arange(batch_size, device=device), family]


def load_set(sets_dir, kind, d, device):
  """(scores, ranks) of the package's fixed validation or test set."""
  path = os.path.join(sets_dir, f"{kind}_d{d}.npz")
  with np.load(path) as data:
    scores = torch.from_numpy(data["scores"]).to(device)
    ranks = torch.from_numpy(data["ranks"]).to(device)
  return scores, ranks


@contextlib.contextmanager
def exact_fp32():
  """Full float32 matrix products (no TF32) inside the block: evaluation and
  the check outputs are compared with TensorFlow's float32."""
  saved = (torch.backends.cuda.matmul.allow_tf32,
           torch.backends.cudnn.allow_tf32)
  torch.backends.cuda.matmul.allow_tf32 = False
  torch.backends.cudnn.allow_tf32 = False
  try:
    yield
  finally:
    (torch.backends.cuda.matmul.allow_tf32,
     torch.backends.cudnn.allow_tf32) = saved


def evaluate_l1(model, scores, ranks, batch_size=1000):
  """Mean over vectors of the summed |rank error| / d, in exact fp32
  (`ops.l1_rank_error`, averaged as `training.evaluate_l1` does)."""
  model.eval()
  total = 0.
  with torch.no_grad(), exact_fp32():
    for start in range(0, scores.shape[0], batch_size):
      out = model(scores[start:start + batch_size])
      total += float((out - ranks[start:start + batch_size]).abs()
                     .mean(dim=-1).sum())
  model.train()
  return total / scores.shape[0]


def learning_rate(args, vectors):
  return args.learning_rate * 0.5 ** (vectors // args.halve_every_vectors)


def write_output(args, argv, model, state, test, final):
  """Writes --output: weights, record and check outputs. After each epoch
  it is a snapshot (`final` false, no test L1) that a lost machine leaves
  usable; the last write adds the test L1."""
  device = next(model.parameters()).device
  record = {
      "sorter": args.sorter, "seq_len": args.seq_len,
      "hyperparameters": hyperparameters(args),
      "l1_torch": evaluate_l1(model, *test) if final else None,
      "final": final,
      "train_vectors": state["vectors"],
      "train_seconds": round(state["seconds"], 1),
      "device": (torch.cuda.get_device_name(device) if device.type == "cuda"
                 else "cpu"),
      "batch_size": args.batch_size,
      "command": " && ".join(state.get("commands", []) + [" ".join(
          ["python3 tools/torch_sorter/train_sorter_torch.py"] +
          list(argv))]),
      "curve": state["curve"],
  }
  model.eval()
  generator = torch.Generator(device="cpu").manual_seed(NUM_CHECK)
  check_inputs = torch.randn(NUM_CHECK, args.seq_len, generator=generator)
  with torch.no_grad(), exact_fp32():
    check_outputs = model(check_inputs.to(device)).cpu()
  model.train()
  arrays = {f"w/{k}": v.detach().cpu().numpy()
            for k, v in model.state_dict().items()
            if not k.endswith("num_batches_tracked")}
  tmp = args.output + ".tmp.npz"
  np.savez_compressed(tmp, record=np.array(json.dumps(record)),
                      check_inputs=check_inputs.numpy(),
                      check_outputs=check_outputs.numpy(), **arrays)
  os.replace(tmp, args.output)
  return record


def parse(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--sorter", choices=SORTERS, required=True)
  parser.add_argument("--seq_len", type=int, default=100)
  parser.add_argument("--units", type=int, default=128)
  parser.add_argument("--num_layers", type=int, default=2)
  parser.add_argument("--projection", choices=("full", "shared"),
                      default="shared")
  parser.add_argument("--width", type=int, default=32)
  parser.add_argument("--batch_size", type=int, default=512)
  parser.add_argument("--learning_rate", type=float, default=1e-3)
  parser.add_argument("--halve_every_vectors", type=int, default=10_000_000)
  parser.add_argument("--epoch_vectors", type=int, default=1_000_000)
  parser.add_argument("--train_vectors", type=int, default=50_000_000)
  parser.add_argument("--max_seconds", type=float, default=0.,
                      help="Stop after the first epoch that ends past this "
                      "many training seconds (0: no limit), counting those "
                      "of the --init_from run; the record holds the vectors "
                      "actually seen.")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--sets", required=True,
                      help="Folder of validation_d<d>.npz and test_d<d>.npz.")
  parser.add_argument("--init_from", default="",
                      help="An --output file of an earlier run whose weights "
                      "start this one; its vectors, seconds and curve come "
                      "first in this run's record, so the learning-rate "
                      "schedule goes on where it stopped (Adam's moments "
                      "start afresh).")
  parser.add_argument("--checkpoint", default="",
                      help="Full state after every epoch; resumed if there.")
  parser.add_argument("--output", required=True)
  parser.add_argument("--device", default="cuda" if torch.cuda.is_available()
                      else "cpu")
  parser.add_argument("--tf32", type=int, default=1,
                      help="TF32 matrix products in training (not in "
                      "evaluation or the check outputs).")
  args = parser.parse_args(argv)
  for name in ("seq_len", "units", "num_layers", "width", "batch_size",
               "halve_every_vectors", "epoch_vectors", "train_vectors"):
    if getattr(args, name) <= 0:
      parser.error(f"--{name}={getattr(args, name)} must be > 0")
  if args.sorter == "cnn_reference" and args.seq_len < 37:
    parser.error(f"--sorter=cnn_reference needs --seq_len >= 37, not "
                 f"{args.seq_len}")
  return args


def main(argv):
  args = parse(argv)
  device = torch.device(args.device)
  torch.backends.cuda.matmul.allow_tf32 = bool(args.tf32)
  torch.backends.cudnn.allow_tf32 = bool(args.tf32)
  torch.manual_seed(args.seed)
  model = build(args).to(device)
  optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
  generator = torch.Generator(device=device)
  generator.manual_seed(args.seed)
  validation = load_set(args.sets, "validation", args.seq_len, device)
  state = {"vectors": 0, "seconds": 0., "curve": []}
  for path in (args.checkpoint, args.output):
    if path:
      os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  if args.init_from:
    with np.load(args.init_from) as data:
      init = json.loads(str(data["record"]))
      model.load_state_dict(
          {k[2:]: torch.from_numpy(data[k]) for k in data.files
           if k.startswith("w/")}, strict=False)
    if (init["sorter"], init["seq_len"], init["hyperparameters"]) != (
        args.sorter, args.seq_len, hyperparameters(args)):
      sys.exit(f"--init_from={args.init_from} trained another sorter.")
    state = {"vectors": init["train_vectors"],
             "seconds": init["train_seconds"], "curve": init["curve"],
             "commands": [init["command"]]}
    # The imported weights' validation L1, against the curve's last point:
    # a wrong mapping shows here before any GPU time is spent training it.
    print(json.dumps({"init_from": args.init_from,
                      "vectors": state["vectors"],
                      "val_l1": round(evaluate_l1(model, *validation), 6),
                      "recorded_val_l1": (state["curve"][-1]["val_l1"]
                                          if state["curve"] else None)}),
          flush=True)
  if args.checkpoint and os.path.exists(args.checkpoint):
    saved = torch.load(args.checkpoint, map_location=device,
                       weights_only=False)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    generator.set_state(saved["generator"].cpu() if device.type == "cpu"
                        else saved["generator"])
    state = saved["state"]
    print(f"resumed at {state['vectors']} vectors", flush=True)
  steps_per_epoch = max(1, args.epoch_vectors // args.batch_size)
  epoch_vectors = steps_per_epoch * args.batch_size
  while (state["vectors"] < args.train_vectors and not (
      args.max_seconds and state["seconds"] >= args.max_seconds)):
    rate = learning_rate(args, state["vectors"])
    for group in optimizer.param_groups:
      group["lr"] = rate
    if device.type == "cuda":
      torch.cuda.synchronize()
    start = time.time()
    loss_sum = torch.zeros((), device=device)
    for _ in range(steps_per_epoch):
      scores = sample_scores(args.batch_size, args.seq_len, generator, device)
      loss = (model(scores) - exact_rank(scores)).abs().mean()
      optimizer.zero_grad(set_to_none=True)
      loss.backward()
      optimizer.step()
      loss_sum += loss.detach()
    if device.type == "cuda":
      torch.cuda.synchronize()
    state["seconds"] += time.time() - start
    state["vectors"] += epoch_vectors
    val_l1 = evaluate_l1(model, *validation)
    state["curve"].append({"vectors": state["vectors"], "val_l1": val_l1,
                           "learning_rate": rate})
    print(json.dumps({"vectors": state["vectors"],
                      "train_l1": float(loss_sum) / steps_per_epoch,
                      "val_l1": round(val_l1, 6), "learning_rate": rate,
                      "seconds": round(state["seconds"], 1)}), flush=True)
    write_output(args, argv, model, state, test=None, final=False)
    if args.checkpoint:
      tmp = args.checkpoint + ".tmp"
      torch.save({"model": model.state_dict(),
                  "optimizer": optimizer.state_dict(),
                  "generator": generator.get_state(), "state": state}, tmp)
      os.replace(tmp, args.checkpoint)
  test = load_set(args.sets, "test", args.seq_len, device)
  record = write_output(args, argv, model, state, test, final=True)
  print(json.dumps({k: v for k, v in record.items() if k != "curve"}),
        flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
