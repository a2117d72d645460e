"""The Montage steps in NumPy, with Montage's argument order (see ``docs/bench.md``).

Every image shares one linear sky grid once projected: pixel ``(x, y)`` of an image is
``x = i - CRPIX1``, ``y = j - CRPIX2`` (1-based ``i``, ``j``) in the template's frame, so
background planes ``a*x + b*y + c`` fitted on difference images and subtracted from
projected images are in one frame. Each function returns a one-line log, as
``montage_wrapper``'s return Montage's status.
"""

from __future__ import annotations

import itertools
import os
import pathlib

import numpy as np

from tether.bench.apps.montage._fits import (
    Header,
    read_fits,
    read_header,
    read_table,
    write_fits,
    write_header,
    write_table,
)
from tether.exceptions import InvalidArgumentError

__all__ = [
    'mAdd',
    'mBackground',
    'mBgModel',
    'mDiff',
    'mFitExec',
    'mImgtbl',
    'mMakeHdr',
    'mOverlaps',
    'mProject',
]

PathLike = str | os.PathLike[str]
_GEOMETRY = ('naxis1', 'naxis2', 'crval1', 'crval2', 'crpix1', 'crpix2', 'cdelt1', 'cdelt2')


def _world_box(h: Header) -> tuple[float, float, float, float]:
    """Sky extent (min x, max x, min y, max y) of an image's pixel edges."""
    xs = [h['CRVAL1'] + (p - h['CRPIX1']) * h['CDELT1'] for p in (0.5, h['NAXIS1'] + 0.5)]
    ys = [h['CRVAL2'] + (p - h['CRPIX2']) * h['CDELT2'] for p in (0.5, h['NAXIS2'] + 0.5)]
    return min(xs), max(xs), min(ys), max(ys)


def _pixel_grid(h: Header) -> tuple[np.ndarray, np.ndarray]:
    """Offsets ``(x, y)`` of every pixel from the reference pixel, shaped like the image."""
    x = np.arange(1, h['NAXIS1'] + 1, dtype=np.float64) - h['CRPIX1']
    y = np.arange(1, h['NAXIS2'] + 1, dtype=np.float64) - h['CRPIX2']
    return np.meshgrid(x, y)


def mImgtbl(img_dir: PathLike, tbl_path: PathLike) -> str:  # noqa: N802
    """Table the geometry of every ``*.fits`` image of ``img_dir``."""
    rows = []
    for cntr, path in enumerate(sorted(pathlib.Path(img_dir).glob('*.fits'))):
        h = read_header(path)
        rows.append([cntr, *(h[k.upper()] for k in _GEOMETRY), path.resolve()])
    write_table(tbl_path, ['cntr', *_GEOMETRY, 'fname'], rows)
    return f'mImgtbl: {len(rows)} images'


def _table_headers(tbl_path: PathLike) -> list[tuple[int, Header, pathlib.Path]]:
    out = []
    for row in read_table(tbl_path):
        h: Header = {k.upper(): float(row[k]) for k in _GEOMETRY}
        h['NAXIS1'], h['NAXIS2'] = int(h['NAXIS1']), int(h['NAXIS2'])
        out.append((int(row['cntr']), h, pathlib.Path(row['fname'])))
    return out


def mMakeHdr(tbl_path: PathLike, hdr_path: PathLike) -> str:  # noqa: N802
    """Write the header template bounding every image of the table, at the finest scale."""
    images = _table_headers(tbl_path)
    if not images:
        raise InvalidArgumentError(f'{tbl_path}: no images to bound')
    boxes = [_world_box(h) for _, h, _ in images]
    scale = min(min(abs(h['CDELT1']), abs(h['CDELT2'])) for _, h, _ in images)
    x0, x1 = min(b[0] for b in boxes), max(b[1] for b in boxes)
    y0, y1 = min(b[2] for b in boxes), max(b[3] for b in boxes)
    header: Header = {
        'SIMPLE': True,
        'BITPIX': -64,
        'NAXIS': 2,
        'NAXIS1': int(np.ceil((x1 - x0) / scale)),
        'NAXIS2': int(np.ceil((y1 - y0) / scale)),
        'CTYPE1': 'RA---CAR',
        'CTYPE2': 'DEC--CAR',
        'CRVAL1': x0 + scale / 2,
        'CRVAL2': y0 + scale / 2,
        'CRPIX1': 1.0,
        'CRPIX2': 1.0,
        'CDELT1': scale,
        'CDELT2': scale,
    }
    write_header(hdr_path, header)
    return f'mMakeHdr: {header["NAXIS1"]} x {header["NAXIS2"]} pixels'


def _bilinear(data: np.ndarray, px: np.ndarray, py: np.ndarray) -> np.ndarray:
    """Sample ``data`` at 0-based fractional pixels; NaN outside the image."""
    ny, nx = data.shape
    inside = (px >= -0.5) & (px <= nx - 0.5) & (py >= -0.5) & (py <= ny - 0.5)
    cx = np.clip(px, 0, nx - 1)
    cy = np.clip(py, 0, ny - 1)
    x0 = np.clip(np.floor(cx).astype(int), 0, max(nx - 2, 0))
    y0 = np.clip(np.floor(cy).astype(int), 0, max(ny - 2, 0))
    x1 = np.minimum(x0 + 1, nx - 1)
    y1 = np.minimum(y0 + 1, ny - 1)
    fx, fy = cx - x0, cy - y0
    top = data[y0, x0] * (1 - fx) + data[y0, x1] * fx
    bottom = data[y1, x0] * (1 - fx) + data[y1, x1] * fx
    out = top * (1 - fy) + bottom * fy
    return np.where(inside, out, np.nan)


def _sub_header(template: Header, box: tuple[float, float, float, float]) -> Header:
    """The template's pixels covering ``box``: a header on the template's grid."""
    t = template
    ix0 = int(np.floor((box[0] - t['CRVAL1']) / t['CDELT1'] + t['CRPIX1'] + 0.5))
    ix1 = int(np.ceil((box[1] - t['CRVAL1']) / t['CDELT1'] + t['CRPIX1'] - 0.5))
    iy0 = int(np.floor((box[2] - t['CRVAL2']) / t['CDELT2'] + t['CRPIX2'] + 0.5))
    iy1 = int(np.ceil((box[3] - t['CRVAL2']) / t['CDELT2'] + t['CRPIX2'] - 0.5))
    ix0, iy0 = max(ix0, 1), max(iy0, 1)
    ix1, iy1 = min(ix1, int(t['NAXIS1'])), min(iy1, int(t['NAXIS2']))
    return {
        **t,
        'NAXIS1': max(ix1 - ix0 + 1, 0),
        'NAXIS2': max(iy1 - iy0 + 1, 0),
        'CRPIX1': t['CRPIX1'] - ix0 + 1,
        'CRPIX2': t['CRPIX2'] - iy0 + 1,
    }


def mProject(input_path: PathLike, output_path: PathLike, template_path: PathLike) -> str:  # noqa: N802
    """Resample an image (bilinear) onto the template's grid, over its own footprint."""
    data, h = read_fits(input_path)
    out_h = _sub_header(read_header(template_path), _world_box(h))
    x, y = _pixel_grid(out_h)
    wx = out_h['CRVAL1'] + x * out_h['CDELT1']
    wy = out_h['CRVAL2'] + y * out_h['CDELT2']
    px = (wx - h['CRVAL1']) / h['CDELT1'] + h['CRPIX1'] - 1
    py = (wy - h['CRVAL2']) / h['CDELT2'] + h['CRPIX2'] - 1
    write_fits(output_path, _bilinear(data, px, py), out_h)
    return f'mProject: {out_h["NAXIS1"]} x {out_h["NAXIS2"]} pixels'


def mOverlaps(img_tbl: PathLike, diffs_tbl: PathLike) -> str:  # noqa: N802
    """Table every pair of images whose footprints overlap."""
    images = _table_headers(img_tbl)
    rows = []
    for (c1, h1, p1), (c2, h2, p2) in itertools.combinations(images, 2):
        b1, b2 = _world_box(h1), _world_box(h2)
        if b1[0] < b2[1] and b2[0] < b1[1] and b1[2] < b2[3] and b2[2] < b1[3]:
            rows.append([c1, c2, p1.name, p2.name, f'diff.{c1:06d}.{c2:06d}.fits'])
    write_table(diffs_tbl, ['cntr1', 'cntr2', 'plus', 'minus', 'diff'], rows)
    return f'mOverlaps: {len(rows)} overlaps'


def _on_grid(data: np.ndarray, h: Header, out: Header) -> np.ndarray:
    """Cut or pad a projected image to ``out``'s pixels (same grid); NaN where absent."""
    dx = round(h['CRPIX1'] - out['CRPIX1'])
    dy = round(h['CRPIX2'] - out['CRPIX2'])
    result = np.full((out['NAXIS2'], out['NAXIS1']), np.nan)
    ys = slice(max(dy, 0), min(dy + out['NAXIS2'], data.shape[0]))
    xs = slice(max(dx, 0), min(dx + out['NAXIS1'], data.shape[1]))
    if ys.start < ys.stop and xs.start < xs.stop:
        result[ys.start - dy : ys.stop - dy, xs.start - dx : xs.stop - dx] = data[ys, xs]
    return result


def mDiff(  # noqa: N802
    image_1: PathLike,
    image_2: PathLike,
    output_path: PathLike,
    template: PathLike,
) -> str:
    """``image_1 - image_2`` over their overlap (both projected onto ``template``)."""
    d1, h1 = read_fits(image_1)
    d2, h2 = read_fits(image_2)
    b1, b2 = _world_box(h1), _world_box(h2)
    box = (max(b1[0], b2[0]), min(b1[1], b2[1]), max(b1[2], b2[2]), min(b1[3], b2[3]))
    out_h = _sub_header(read_header(template), box)
    diff = _on_grid(d1, h1, out_h) - _on_grid(d2, h2, out_h)
    write_fits(output_path, diff, out_h)
    return f'mDiff: {int(np.isfinite(diff).sum())} pixels'


def _fit_plane(data: np.ndarray, h: Header) -> tuple[float, float, float, int]:
    x, y = _pixel_grid(h)
    ok = np.isfinite(data)
    n = int(ok.sum())
    if n < 3:
        return 0.0, 0.0, 0.0, n
    design = np.column_stack([x[ok], y[ok], np.ones(n)])
    (a, b, c), *_ = np.linalg.lstsq(design, data[ok], rcond=None)
    return float(a), float(b), float(c), n


def mFitExec(diffs_tbl: PathLike, fits_tbl: PathLike, diff_dir: PathLike) -> str:  # noqa: N802
    """Fit a plane ``a*x + b*y + c`` to every difference image."""
    rows = []
    for row in read_table(diffs_tbl):
        data, h = read_fits(pathlib.Path(diff_dir) / row['diff'])
        a, b, c, n = _fit_plane(data, h)
        rows.append([row['cntr1'], row['cntr2'], repr(a), repr(b), repr(c), n])
    write_table(fits_tbl, ['plus', 'minus', 'a', 'b', 'c', 'npixel'], rows)
    return f'mFitExec: {len(rows)} fits'


def mBgModel(img_tbl: PathLike, fits_tbl: PathLike, corrections_tbl: PathLike) -> str:  # noqa: N802
    """Per-image planes whose pairwise differences best match the fits (least squares).

    The planes are defined up to one common plane; the smallest (zero-mean) solution
    is taken, so the mosaic keeps the images' mean level.
    """
    ids = [cntr for cntr, _, _ in _table_headers(img_tbl)]
    index = {cntr: i for i, cntr in enumerate(ids)}
    fits = [f for f in read_table(fits_tbl) if int(f['npixel']) >= 3]
    coefficients: np.ndarray = np.zeros((len(ids), 3))
    if fits:
        design = np.zeros((len(fits), len(ids)))
        targets = np.zeros((len(fits), 3))
        for k, fit in enumerate(fits):
            design[k, index[int(fit['plus'])]] = 1.0
            design[k, index[int(fit['minus'])]] = -1.0
            targets[k] = [float(fit['a']), float(fit['b']), float(fit['c'])]
        coefficients, *_ = np.linalg.lstsq(design, targets, rcond=None)
    rows = [[cntr, *(repr(float(v)) for v in coefficients[i])] for i, cntr in enumerate(ids)]
    write_table(corrections_tbl, ['id', 'a', 'b', 'c'], rows)
    return f'mBgModel: {len(ids)} corrections from {len(fits)} fits'


def mBackground(  # noqa: N802
    in_image: PathLike,
    out_image: PathLike,
    a: float,
    b: float,
    c: float,
) -> str:
    """Subtract the plane ``a*x + b*y + c`` from a projected image."""
    data, h = read_fits(in_image)
    x, y = _pixel_grid(h)
    write_fits(out_image, data - (a * x + b * y + c), h)
    return 'mBackground: done'


def mAdd(  # noqa: N802
    images_table: PathLike,
    template_header: PathLike,
    out_image: PathLike,
    img_dir: PathLike,
) -> str:
    """Co-add the table's images (read from ``img_dir``) on the template: their mean."""
    t = read_header(template_header)
    total = np.zeros((t['NAXIS2'], t['NAXIS1']))
    count = np.zeros_like(total)
    for _, _, path in _table_headers(images_table):
        data, h = read_fits(pathlib.Path(img_dir) / path.name)
        placed = _on_grid(data, h, t)
        ok = np.isfinite(placed)
        total[ok] += placed[ok]
        count[ok] += 1
    with np.errstate(invalid='ignore', divide='ignore'):
        mosaic = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    write_fits(out_image, mosaic, t)
    return f'mAdd: {int((count > 0).sum())} pixels covered'
