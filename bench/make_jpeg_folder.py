#!/usr/bin/env python3
"""Writes the loader benchmark's JPEG folder (ImageFolder layout), deterministically.

    make_jpeg_folder.py OUT [--images 20000] [--classes 100] [--seed 0]
        OUT/train/cNNN/NNNNNNN.jpg: --images JPEGs (quality 90) of random sizes, each side drawn
        from 256..500 px (ImageNet's photos are mostly 500 x 375 or 375 x 500, resized copies
        often 256+), content: a random 6x6 colour field upscaled bilinearly plus noise, so that the files are photo-like in size (tens of KB) and decode cost, not flat
        colour that compresses to nothing. (Uniform integer noise of +-12, sigma 7, is drawn
        instead of Gaussian: a quarter of the generation time, the same file sizes.) OUT/test/ gets 2 images per class (the loaders need
        the split to exist). Numpy + Pillow; seeded per image, so any process count gives the
        same bytes.

    make_jpeg_folder.py OUT --links-from SRC [--ram-factor 10] [--ram-bytes N]
        A folder whose images, decoded, would take --ram-factor times the machine's memory
        (MemTotal, or --ram-bytes): as many hard links to SRC/train's JPEGs as that needs, at
        SRC's mean decoded size (H x W x 3 bytes). Hard links cost an inode entry each and no
        data, so the folder is made in seconds on any disk. It is valid for measuring the
        loader's memory: the loader keeps one path per file and decodes every entry on its own,
        exactly as for distinct files; only the page cache sees 20,000 distinct files, which
        makes reading cheaper than a real data set's disk reads, so throughput measured on it
        is optimistic, and the benchmark reports only its peak RSS.
"""
import argparse
import multiprocessing
import os
import sys

import numpy as np
from PIL import Image

MIN_SIDE, MAX_SIDE = 256, 500


def write_image(args):
    out, index, classes, seed = args
    rng = np.random.default_rng([seed, index])
    width, height = (int(v) for v in rng.integers(MIN_SIDE, MAX_SIDE + 1, size=2))
    field = rng.integers(0, 256, size=(6, 6, 3), dtype=np.uint8)
    image = np.asarray(Image.fromarray(field).resize((width, height), Image.BILINEAR), dtype=np.int16)
    image += rng.integers(-12, 13, size=image.shape, dtype=np.int16)
    path = os.path.join(out, f"c{index % classes:03d}", f"{index:07d}.jpg")
    Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(path, quality=90)
    return width * height * 3


def make_folder(out, images, classes, seed):
    for split in ("train", "test"):
        for c in range(classes):
            os.makedirs(os.path.join(out, split, f"c{c:03d}"), exist_ok=True)
    jobs = [(os.path.join(out, "train"), i, classes, seed) for i in range(images)]
    jobs += [(os.path.join(out, "test"), images + i, classes, seed) for i in range(2 * classes)]
    with multiprocessing.Pool() as pool:
        decoded = sum(pool.imap_unordered(write_image, jobs, chunksize=64))
    print(f"{out}: {images} train + {2 * classes} test JPEGs, {decoded / 2**30:.1f} GiB decoded")


def mem_total_bytes():
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


def make_links(out, source, factor, ram_bytes):
    train = os.path.join(source, "train")
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(train) for name in names
                   if name.endswith(".jpg"))
    if not files:
        sys.exit(f"{train}: no .jpg files; make the source folder first (without --links-from)")
    sample = files[:: max(1, len(files) // 500)]
    mean_decoded = sum(Image.open(f).size[0] * Image.open(f).size[1] * 3 for f in sample) / len(sample)
    ram = ram_bytes or mem_total_bytes()
    count = int(factor * ram / mean_decoded) + 1
    classes = 1000
    for c in range(classes):
        os.makedirs(os.path.join(out, "train", f"c{c:03d}"), exist_ok=True)
    for i in range(count):
        link = os.path.join(out, "train", f"c{i % classes:03d}", f"{i:08d}.jpg")
        if not os.path.exists(link):
            os.link(files[i % len(files)], link)
    test = os.path.join(out, "test", "c000")
    os.makedirs(test, exist_ok=True)
    if not os.path.exists(os.path.join(test, "0.jpg")):
        os.link(files[0], os.path.join(test, "0.jpg"))
    print(f"{out}: {count} hard links to {len(files)} JPEGs of {train}: {count * mean_decoded / 2**30:.0f} GiB "
          f"decoded = {factor} x {ram / 2**30:.1f} GiB of memory")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--images", type=int, default=20000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--links-from", help="make the hard-link folder from this generated folder")
    parser.add_argument("--ram-factor", type=float, default=10)
    parser.add_argument("--ram-bytes", type=int, default=0, help="memory to exceed (default: MemTotal)")
    args = parser.parse_args()
    if args.links_from:
        make_links(args.out, args.links_from, args.ram_factor, args.ram_bytes)
    else:
        make_folder(args.out, args.images, args.classes, args.seed)


if __name__ == "__main__":
    main()
