#!/usr/bin/env python3
"""Writes the JPEG test images and, next to each, the RGB bytes PIL decodes it to (<name>.rgb,
height x width x 3), for DataImageFolder.JpegDecodesAsPil. Needs Pillow (pip install pillow).
Run from this folder: python3 make_goldens.py"""
import numpy as np
from PIL import Image, features

rng = np.random.default_rng(7)
h, w = 23, 37  # odd sizes: partial MCUs in both directions
y, x = np.mgrid[0:h, 0:w]
smooth = np.stack([x * 255 / w, y * 255 / h, (x + y) * 255 / (w + h)], -1)
rgb = np.clip(smooth + rng.normal(0, 24, (h, w, 3)), 0, 255).astype(np.uint8)
images = {
    "rgb_420": (Image.fromarray(rgb), dict(quality=85)),
    "rgb_444_progressive": (Image.fromarray(rgb), dict(quality=92, subsampling=0, progressive=True)),
    "rgb_422": (Image.fromarray(rgb), dict(quality=75, subsampling=1)),
    "gray": (Image.fromarray(rgb[:, :, 1]), dict(quality=90)),
    "cmyk": (Image.fromarray(rgb).convert("CMYK"), dict(quality=90)),
}
for name, (im, opts) in images.items():
    im.save(name + ".jpg", **opts)
    decoded = Image.open(name + ".jpg").convert("RGB")
    np.asarray(decoded).tofile(name + ".rgb")
print("libjpeg-turbo", features.version("libjpeg_turbo"), "Pillow", Image.__version__)
