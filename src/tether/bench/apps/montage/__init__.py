"""Montage: mosaic overlapping sky images (project, fit backgrounds, co-add).

The workflow of the Montage toolkit as TaPS runs it: a header template bounding the
images (``configure_montage``), one projection task per image (``mproject``), a table of
the projected images (``mimgtbl``) and of their overlaps (``moverlaps``), one difference
task per overlap (``mdiff``), a plane fitted to each difference and the per-image
background corrections that best explain them (``bgexec_prep``), one correction task per
image (``mbackground``) and the co-added mosaic (``madd``), written as ``mosaic.fits``.

Each step runs with a *toolkit*: ``'montage'`` calls the Montage programs through the
``montage_wrapper`` package (which needs Montage's binaries on ``PATH``), ``'numpy'``
runs tether's implementation of the same steps (:mod:`._numpy`: linear sky projection,
bilinear resampling, least-squares planes), and ``'auto'`` (the default) takes
``montage_wrapper`` when it imports, NumPy otherwise. Without ``img_folder`` the app
writes synthetic tiles first (:func:`generate_images`).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import pathlib
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

import pydantic

from tether.bench.apps import AppConfig
from tether.bench.apps._common import HoldsNothing
from tether.bench.apps.montage._data import generate_images
from tether.bench.apps.montage._fits import read_fits, read_table
from tether.bench.engine.task import task
from tether.bench.registry import register
from tether.exceptions import ConfigError

if TYPE_CHECKING:
    from tether.bench.engine import Engine

__all__ = [
    'MontageApp',
    'MontageAppConfig',
    'Toolkit',
    'bgexec_prep',
    'configure_montage',
    'generate_images',
    'madd',
    'mbackground',
    'mdiff',
    'mimgtbl',
    'moverlaps',
    'mproject',
    'read_fits',
    'resolve_toolkit',
]

logger = logging.getLogger(__name__)

Toolkit = Literal['auto', 'montage', 'numpy']


def resolve_toolkit(toolkit: str = 'auto') -> Literal['montage', 'numpy']:
    """``'montage'`` or ``'numpy'``: what ``toolkit`` means in this process."""
    if toolkit == 'numpy':
        return 'numpy'
    try:
        importlib.import_module('montage_wrapper')
    except ImportError as e:
        if toolkit == 'montage':
            raise ConfigError(
                "toolkit 'montage' needs the montage_wrapper package and Montage's programs",
            ) from e
        return 'numpy'
    if toolkit not in ('auto', 'montage'):
        raise ConfigError(f"toolkit must be 'auto', 'montage' or 'numpy', not {toolkit!r}")
    return 'montage'


def _tools(toolkit: str) -> ModuleType:
    if resolve_toolkit(toolkit) == 'montage':
        return importlib.import_module('montage_wrapper')
    return importlib.import_module('tether.bench.apps.montage._numpy')


def _call(toolkit: str, program: str, *args: object) -> None:
    """Run Montage's ``program`` (or its NumPy stand-in) on ``args``, paths as strings; log it."""
    tool = getattr(_tools(toolkit), program)
    log = tool(*(os.fspath(a) if isinstance(a, os.PathLike) else a for a in args))
    logger.debug('%s: %s', program, log)


def configure_montage(
    img_folder: pathlib.Path,
    img_tbl: pathlib.Path,
    img_hdr: pathlib.Path,
    *,
    toolkit: Toolkit = 'auto',
) -> None:
    """Table the input images (``img_tbl``) and write the template bounding them (``img_hdr``)."""
    _call(toolkit, 'mImgtbl', img_folder, img_tbl)
    _call(toolkit, 'mMakeHdr', img_tbl, img_hdr)


@task()
def mproject(
    input_path: pathlib.Path,
    template_path: pathlib.Path,
    output_path: pathlib.Path,
    *,
    toolkit: Toolkit = 'auto',
) -> pathlib.Path:
    """Project one image onto the template's grid; return ``output_path``."""
    _call(toolkit, 'mProject', input_path, output_path, template_path)
    return output_path


@task()
def mimgtbl(
    img_dir: pathlib.Path, tbl_path: pathlib.Path, toolkit: Toolkit = 'auto'
) -> pathlib.Path:
    """Table the geometry of the images of ``img_dir``; return ``tbl_path``."""
    _call(toolkit, 'mImgtbl', img_dir, tbl_path)
    return tbl_path


@task()
def moverlaps(
    img_tbl: pathlib.Path, diffs_tbl: pathlib.Path, toolkit: Toolkit = 'auto'
) -> pathlib.Path:
    """Table the overlapping pairs of the table's images; return ``diffs_tbl``."""
    _call(toolkit, 'mOverlaps', img_tbl, diffs_tbl)
    return diffs_tbl


@task()
def mdiff(
    image_1: pathlib.Path,
    image_2: pathlib.Path,
    template: pathlib.Path,
    output_path: pathlib.Path,
    *,
    toolkit: Toolkit = 'auto',
) -> pathlib.Path:
    """Difference of two projected images over their overlap; return ``output_path``."""
    _call(toolkit, 'mDiff', image_1, image_2, output_path, template)
    return output_path


@task()
def bgexec_prep(
    img_table: pathlib.Path,
    diffs_table: pathlib.Path,
    diff_dir: pathlib.Path,
    output_dir: pathlib.Path,
    *,
    toolkit: Toolkit = 'auto',
) -> pathlib.Path:
    """Fit a plane to each difference, then model per-image corrections; return their table."""
    fits_tbl = pathlib.Path(output_dir) / 'fits.tbl'
    corrections_tbl = pathlib.Path(output_dir) / 'corrections.tbl'
    _call(toolkit, 'mFitExec', diffs_table, fits_tbl, diff_dir)
    _call(toolkit, 'mBgModel', img_table, fits_tbl, corrections_tbl)
    return corrections_tbl


@task()
def mbackground(
    in_image: pathlib.Path,
    out_image: pathlib.Path,
    a: float,
    b: float,
    c: float,
    *,
    toolkit: Toolkit = 'auto',
) -> pathlib.Path:
    """Subtract the background plane ``a*x + b*y + c``; return ``out_image``."""
    _call(toolkit, 'mBackground', in_image, out_image, a, b, c)
    return out_image


@task()
def madd(
    images_table: pathlib.Path,
    template_header: pathlib.Path,
    out_image: pathlib.Path,
    corr_dir: pathlib.Path,
    *,
    toolkit: Toolkit = 'auto',
) -> pathlib.Path:
    """Co-add the corrected images (in ``corr_dir``) into the mosaic; return ``out_image``."""
    _call(toolkit, 'mAdd', images_table, template_header, out_image, corr_dir)
    return out_image


def _image_name(row: dict[str, str]) -> str:
    for column in ('fname', 'fitshdr'):
        if column in row:
            return row[column]
    raise ConfigError(f'image table row without a file name column: {sorted(row)}')


@dataclasses.dataclass(eq=False)
class MontageApp(HoldsNothing):
    """The Montage mosaic workflow (see the module's docstring).

    Args:
        img_folder: Directory of input ``*.fits`` images; ``None`` writes synthetic tiles
            (``synthetic_rows x synthetic_columns`` of ``synthetic_size`` pixels) into
            ``<output_dir>/images`` first.
        img_tbl: File name of the input images' table (in ``output_dir``).
        img_hdr: File name of the header template (in ``output_dir``).
        output_dir: Directory of intermediate and final files, relative to the run directory.
        toolkit: ``'auto'``, ``'montage'`` or ``'numpy'``.
    """

    img_folder: pathlib.Path | None = None
    img_tbl: str = 'Kimages.tbl'
    img_hdr: str = 'Kimages.hdr'
    output_dir: str = 'data'
    _: dataclasses.KW_ONLY
    toolkit: Toolkit = 'auto'
    synthetic: dict[str, Any] = dataclasses.field(default_factory=dict)

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Run the workflow; the mosaic is ``<run_dir>/<output_dir>/mosaic.fits``."""
        from tether.bench.engine import wait

        tk = resolve_toolkit(self.toolkit)
        out = pathlib.Path(run_dir) / self.output_dir
        out.mkdir(parents=True, exist_ok=True)
        img_folder = self.img_folder
        if img_folder is None:
            img_folder = out / 'images'
            generate_images(img_folder, **self.synthetic)
        img_hdr = out / self.img_hdr
        configure_montage(img_folder, out / self.img_tbl, img_hdr, toolkit=tk)
        projections = out / 'projections'
        projections.mkdir(exist_ok=True)
        images = sorted(pathlib.Path(img_folder).glob('*.fits'))
        wait(
            [
                engine.submit(
                    mproject, image, img_hdr, projections / f'hdu0_{image.name}', toolkit=tk
                )
                for image in images
            ],
        )
        logger.info('montage: %d images projected (%s toolkit)', len(images), tk)

        img_tbl = engine.submit(mimgtbl, projections, out / 'images.tbl', toolkit=tk).result()
        diffs_tbl = engine.submit(moverlaps, img_tbl, out / 'diffs.tbl', toolkit=tk).result()
        diffs = out / 'diffs'
        diffs.mkdir(exist_ok=True)
        overlaps = read_table(diffs_tbl)
        wait(
            [
                engine.submit(
                    mdiff,
                    projections / row['plus'],
                    projections / row['minus'],
                    img_hdr,
                    diffs / row['diff'],
                    toolkit=tk,
                )
                for row in overlaps
            ],
        )
        corrections_tbl = engine.submit(
            bgexec_prep, img_tbl, diffs_tbl, diffs, out, toolkit=tk
        ).result()
        planes = {int(r['id']): r for r in read_table(corrections_tbl)}

        corrected = out / 'corrections'
        corrected.mkdir(exist_ok=True)
        futures = []
        for i, row in enumerate(read_table(img_tbl)):
            plane = planes.get(int(row.get('cntr', i)), {'a': '0', 'b': '0', 'c': '0'})
            name = pathlib.Path(_image_name(row)).name
            futures.append(
                engine.submit(
                    mbackground,
                    projections / name,
                    corrected / name,
                    float(plane['a']),
                    float(plane['b']),
                    float(plane['c']),
                    toolkit=tk,
                ),
            )
        wait(futures)
        mosaic = engine.submit(madd, img_tbl, img_hdr, out / 'mosaic.fits', corrected, toolkit=tk)
        logger.info(
            'montage: %d overlaps, %d corrections; mosaic %s',
            len(overlaps),
            len(planes),
            mosaic.result(),
        )


@register('app')
class MontageAppConfig(AppConfig):
    """Mosaic overlapping sky images (TaPS's ``montage``); synthetic without ``img_folder``."""

    name: str = 'montage'
    img_folder: pathlib.Path | None = pydantic.Field(
        default=None,
        description='directory of input *.fits images (default: synthetic tiles)',
    )
    img_tbl: str = pydantic.Field(
        default='Kimages.tbl',
        description='file name of the input image table (in output_dir)',
    )
    img_hdr: str = pydantic.Field(
        default='Kimages.hdr',
        description='file name of the header template (in output_dir)',
    )
    output_dir: str = pydantic.Field(
        default='data',
        description='directory of intermediate and final data, relative to the run directory',
    )
    toolkit: Toolkit = pydantic.Field(
        default='auto',
        description="'montage' (montage_wrapper and Montage's programs), 'numpy', or 'auto'",
    )
    synthetic_rows: int = pydantic.Field(default=2, ge=1, description='synthetic tile rows')
    synthetic_columns: int = pydantic.Field(default=2, ge=1, description='synthetic tile columns')
    synthetic_size: int = pydantic.Field(
        default=48, ge=4, description='synthetic tile side (pixels)'
    )
    seed: int = pydantic.Field(default=0, description='random seed of the synthetic tiles')

    def get_app(self) -> MontageApp:
        """Build the app."""
        return MontageApp(
            img_folder=self.img_folder,
            img_tbl=self.img_tbl,
            img_hdr=self.img_hdr,
            output_dir=self.output_dir,
            toolkit=self.toolkit,
            synthetic={
                'rows': self.synthetic_rows,
                'columns': self.synthetic_columns,
                'size': self.synthetic_size,
                'seed': self.seed,
            },
        )
