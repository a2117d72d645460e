"""Synthetic sky images for the montage app: overlapping tiles of one generated sky."""

from __future__ import annotations

import os
import pathlib

import numpy as np

from tether.bench.apps.montage._fits import write_fits

__all__ = ['generate_images']


def _sky(x: np.ndarray, y: np.ndarray, rng_seed: int, extent: float) -> np.ndarray:
    """A sky of Gaussian point sources and a faint gradient, at sky coordinates ``x, y``."""
    rng = np.random.default_rng(rng_seed)
    count = max(8, int(40 * extent * extent))
    sx = rng.uniform(0, extent, count)
    sy = rng.uniform(0, extent, count)
    flux = rng.lognormal(2.0, 0.8, count)
    width = 0.004
    sky = 0.5 * (x / max(extent, 1e-9))
    for cx, cy, f in zip(sx, sy, flux, strict=True):
        sky = sky + f * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * width * width))
    return sky


def generate_images(
    folder: str | os.PathLike[str],
    *,
    rows: int = 2,
    columns: int = 2,
    size: int = 48,
    overlap: float = 0.25,
    scale: float = 0.002,
    noise: float = 0.05,
    seed: int = 0,
) -> list[pathlib.Path]:
    """Write ``rows x columns`` overlapping FITS tiles of one sky into ``folder``.

    Each tile is ``size`` pixels square at ``scale`` (sky units a pixel), offset from its
    neighbours by ``1 - overlap`` of a tile plus a fraction of a pixel (so projection
    resamples), with its own background plane ``a*x + b*y + c`` and Gaussian noise, as
    exposures taken at different times differ. Returns the paths written.
    """
    if rows < 1 or columns < 1 or size < 4 or not 0 < overlap < 1:
        raise ValueError('need rows, columns >= 1, size >= 4 and 0 < overlap < 1')
    out = pathlib.Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    step = size * (1 - overlap) * scale
    extent = step * max(rows, columns) + size * scale
    # Pixel offsets (column, row), the same for every tile: its sky coordinates and its
    # background plane are both made from them.
    gx, gy = np.meshgrid(np.arange(size, dtype=float), np.arange(size, dtype=float))
    paths = []
    for r in range(rows):
        for c in range(columns):
            x0 = c * step + rng.uniform(0, 0.5) * scale
            y0 = r * step + rng.uniform(0, 0.5) * scale
            image = _sky(gx * scale + x0, gy * scale + y0, seed, extent)
            a, b = rng.normal(0, 0.01, 2)
            image += a * gx + b * gy + rng.uniform(-2, 2)
            image += rng.normal(0, noise, image.shape)
            header = {
                'CTYPE1': 'RA---CAR',
                'CTYPE2': 'DEC--CAR',
                'CRVAL1': float(x0),
                'CRVAL2': float(y0),
                'CRPIX1': 1.0,
                'CRPIX2': 1.0,
                'CDELT1': scale,
                'CDELT2': scale,
            }
            path = out / f'tile_{r}_{c}.fits'
            write_fits(path, image, header)
            paths.append(path)
    return paths
