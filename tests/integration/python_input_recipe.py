"""Reproduces an mgpu run's test accuracy in Python from the raw test files, with nothing but
the run folder: summary.json's "input" recipe and model_state_dict.pt, as docs/GUIDE.md's "Using
the trained model in Python" shows.

    python_input_recipe.py RUN_FOLDER TEST_IMAGES_IDX_GZ TEST_LABELS_IDX_GZ

The run trained on an MNIST-like data set (grayscale IDX files, no resize). Prints
{"correct": K, "total": N} as JSON.
"""
import gzip
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchvision_state_dict import build  # noqa: E402  torchvision's architectures, torchvision-free


def read_idx(path):
    """An IDX file (gzip) as a uint8 tensor of its shape."""
    data = gzip.open(path).read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def main():
    run, images_path, labels_path = sys.argv[1:4]
    with open(os.path.join(run, "summary.json")) as f:
        summary = json.load(f)
    recipe = summary["input"]
    if not recipe["resize"].startswith("none") or recipe["channel_order"] != "grayscale":
        sys.exit(f"this script reproduces grayscale runs without a resize, not {recipe}")
    # The recipe: (N, C, H, W) float32 in [0, 1], then (x - mean) / std per channel.
    images = read_idx(images_path).unsqueeze(1).float() / 255
    mean = torch.tensor(recipe["mean"]).view(1, -1, 1, 1)
    std = torch.tensor(recipe["std"]).view(1, -1, 1, 1)
    inputs = (images - mean) / std
    labels = read_idx(labels_path).long()

    model = build(summary["model"], recipe["channels"], len(summary["class_names"]), recipe["height"])
    model.load_state_dict(torch.load(os.path.join(run, summary["state_dict_file"]), weights_only=True))
    model.eval()
    with torch.no_grad():
        correct = int((model(inputs).argmax(1) == labels).sum())
    print(json.dumps({"correct": correct, "total": int(labels.numel())}))


if __name__ == "__main__":
    main()
