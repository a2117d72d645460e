"""The montage and docking applications: their steps, their inputs and their errors.

Both run on every executor in test_apps.py; here each step is checked for what it
computes (tether's NumPy Montage steps, the docking score and search) on small
generated inputs.
"""

from __future__ import annotations

import concurrent.futures
import csv
import math
import pathlib
import sys

import numpy as np
import pydantic
import pytest

from tether.bench.apps.configs.docking import DockingConfig
from tether.bench.apps.configs.montage import MontageConfig
from tether.bench.apps.docking import (
    DockingApp,
    generate_ligands,
    generate_receptor,
    read_smiles,
    simulate,
)
from tether.bench.apps.docking._score import dock, ligand_atoms, read_pdbqt
from tether.bench.apps.montage import (
    MontageApp,
    generate_images,
    madd,
    mimgtbl,
    read_fits,
    resolve_toolkit,
)
from tether.bench.apps.montage import _numpy as numpy_toolkit
from tether.bench.apps.montage._fits import (
    read_header,
    read_table,
    write_fits,
    write_header,
    write_table,
)
from tether.bench.engine import Engine
from tether.bench.registry import get_plugin
from tether.exceptions import ConfigError, InvalidArgumentError


def _engine() -> Engine:
    return Engine(concurrent.futures.ThreadPoolExecutor(2))


# --- montage ---------------------------------------------------------------------


def test_fits_round_trip(tmp_path: pathlib.Path) -> None:
    data = np.arange(12, dtype=float).reshape(3, 4)
    write_fits(tmp_path / 'a.fits', data, {'CRVAL1': 1.5, 'CTYPE1': "RA'S", 'FLAG': False})
    raw = (tmp_path / 'a.fits').read_bytes()
    assert len(raw) % 2880 == 0
    assert raw.startswith(b'SIMPLE  =                    T')
    back, header = read_fits(tmp_path / 'a.fits')
    assert np.array_equal(back, data)
    assert (header['NAXIS1'], header['NAXIS2']) == (4, 3)
    assert (header['CRVAL1'], header['CTYPE1'], header['FLAG']) == (1.5, "RA'S", False)


def test_fits_errors(tmp_path: pathlib.Path) -> None:
    (tmp_path / 'bad.fits').write_bytes(b'not fits' * 10)
    with pytest.raises(InvalidArgumentError, match='not a FITS file'):
        read_fits(tmp_path / 'bad.fits')
    with pytest.raises(InvalidArgumentError, match='two axes'):
        write_fits(tmp_path / 'c.fits', np.zeros(3), {})
    with pytest.raises(InvalidArgumentError, match='longer than 8'):
        write_fits(tmp_path / 'c.fits', np.zeros((2, 2)), {'TOOLONGKEY': 1})


def test_header_and_table_files(tmp_path: pathlib.Path) -> None:
    write_header(tmp_path / 't.hdr', {'NAXIS1': 5, 'CDELT1': 0.25})
    assert read_header(tmp_path / 't.hdr') == {'NAXIS1': 5, 'CDELT1': 0.25}
    write_table(tmp_path / 't.tbl', ['id', 'a'], [[0, 1.5], [1, -2.0]])
    assert read_table(tmp_path / 't.tbl') == [{'id': '0', 'a': '1.5'}, {'id': '1', 'a': '-2.0'}]
    (tmp_path / 'bad.tbl').write_text(' 0 1\n| id | a |\n')
    with pytest.raises(InvalidArgumentError, match='before the column names'):
        read_table(tmp_path / 'bad.tbl')
    (tmp_path / 'ragged.tbl').write_text('| id | a |\n 0 1 2\n')
    with pytest.raises(InvalidArgumentError, match='does not match'):
        read_table(tmp_path / 'ragged.tbl')


def _overlap_offsets(run: pathlib.Path, directory: str) -> list[float]:
    """Mean difference of each overlapping pair of ``directory``'s images."""
    images = {p.name: read_fits(p) for p in (run / 'data' / directory).glob('*.fits')}
    offsets = []
    for row in read_table(run / 'data' / 'diffs.tbl'):
        (d1, h1), (d2, h2) = images[row['plus']], images[row['minus']]
        grid = numpy_toolkit._sub_header(h1, numpy_toolkit._world_box(h2))
        diff = numpy_toolkit._on_grid(d1, h1, grid) - numpy_toolkit._on_grid(d2, h2, grid)
        offsets.append(float(np.nanmean(diff)))
    return offsets


def test_montage_matches_backgrounds(tmp_path: pathlib.Path) -> None:
    # Tiles of one sky with a background offset each: the projected tiles disagree
    # where they overlap; the corrected ones agree to well within the offsets.
    app = MontageConfig(synthetic_rows=2, synthetic_columns=3, seed=3).get_app()
    with _engine() as engine:
        app.run(engine, tmp_path)
    before = _overlap_offsets(tmp_path, 'projections')
    after = _overlap_offsets(tmp_path, 'corrections')
    assert len(before) == len(after) >= 7  # 2 x 3 tiles: sides and diagonals
    assert max(abs(v) for v in before) > 0.5
    assert max(abs(v) for v in after) < 0.1
    mosaic, header = read_fits(tmp_path / 'data' / 'mosaic.fits')
    template = read_header(tmp_path / 'data' / 'Kimages.hdr')
    assert mosaic.shape == (template['NAXIS2'], template['NAXIS1'])
    assert header['CDELT1'] == template['CDELT1']


def test_montage_on_given_images(tmp_path: pathlib.Path) -> None:
    images = tmp_path / 'in'
    generate_images(images, rows=1, columns=2, size=16)
    config = MontageConfig(img_folder=images, output_dir='out', img_tbl='raw.tbl')
    assert config.img_folder == images.absolute()
    app = config.get_app()
    with _engine() as engine:
        app.run(engine, tmp_path)
    assert (tmp_path / 'out' / 'raw.tbl').exists()
    assert len(read_table(tmp_path / 'out' / 'diffs.tbl')) == 1
    assert not (tmp_path / 'out' / 'images').exists()


def test_montage_wrapper_toolkit(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # With montage_wrapper importable, 'auto' calls it with Montage's argument order.
    # The stand-in records each call and runs tether's step with the same arguments.
    calls: list[str] = []

    class Wrapper:
        def __getattr__(self, name: str) -> object:
            step = getattr(numpy_toolkit, name)

            def call(*args: object) -> object:
                calls.append(name)
                return step(*args)

            return call

    monkeypatch.setitem(sys.modules, 'montage_wrapper', Wrapper())
    assert resolve_toolkit('auto') == 'montage'
    app = MontageApp(synthetic={'rows': 1, 'columns': 2, 'size': 16})
    with _engine() as engine:
        app.run(engine, tmp_path)
    assert calls[:2] == ['mImgtbl', 'mMakeHdr']
    assert {'mProject', 'mOverlaps', 'mDiff', 'mFitExec', 'mBgModel', 'mBackground'} <= set(calls)
    assert calls[-1] == 'mAdd'


def test_montage_toolkit_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, 'montage_wrapper', None)  # import fails
    assert resolve_toolkit('auto') == 'numpy'
    with pytest.raises(ConfigError, match='montage_wrapper'):
        resolve_toolkit('montage')
    monkeypatch.setitem(sys.modules, 'montage_wrapper', object())
    with pytest.raises(ConfigError, match='not'):
        resolve_toolkit('fits')
    with pytest.raises(pydantic.ValidationError):
        MontageConfig(toolkit='fits')
    with pytest.raises(ValueError, match='overlap'):
        generate_images('/nonexistent', overlap=1.0)


def test_montage_steps_called_directly(tmp_path: pathlib.Path) -> None:
    # Tasks called outside an engine run in place; madd of a table with no images is
    # an empty (all-NaN) mosaic on the template.
    (tmp_path / 'empty').mkdir()
    table = mimgtbl(tmp_path / 'empty', tmp_path / 'e.tbl', toolkit='numpy')
    assert read_table(table) == []
    write_header(tmp_path / 't.hdr', {'NAXIS1': 3, 'NAXIS2': 2})
    out = madd(table, tmp_path / 't.hdr', tmp_path / 'm.fits', tmp_path, toolkit='numpy')
    mosaic, _ = read_fits(out)
    assert mosaic.shape == (2, 3)
    assert np.isnan(mosaic).all()
    with pytest.raises(InvalidArgumentError, match='no images'):
        numpy_toolkit.mMakeHdr(table, tmp_path / 'x.hdr')


# --- docking ---------------------------------------------------------------------


def test_docking_config() -> None:
    config = DockingConfig(initial_simulations=4)
    assert config.smi_file_name_ligand is None
    with pytest.raises(pydantic.ValidationError, match='Number of initial simulations'):
        DockingConfig(initial_simulations=3)
    with pytest.raises(ValueError, match='at least four'):
        DockingApp(initial_simulations=1)
    assert get_plugin('app', 'docking') is DockingConfig
    assert get_plugin('app', 'montage') is MontageConfig


def test_read_smiles(tmp_path: pathlib.Path) -> None:
    (tmp_path / 'a.csv').write_text('name,Smiles\nethanol,CCO\nbenzene,c1ccccc1\n')
    assert read_smiles(tmp_path / 'a.csv') == ['CCO', 'c1ccccc1']
    (tmp_path / 'b.smi').write_text('CCO ethanol\n\nCCN\n')
    assert read_smiles(tmp_path / 'b.smi') == ['CCO', 'CCN']
    (tmp_path / 'c.smi').write_text('')
    assert read_smiles(tmp_path / 'c.smi') == []
    ligands = generate_ligands(tmp_path / 'l.csv', count=5)
    assert len(read_smiles(ligands)) == 5


def test_docking_score(tmp_path: pathlib.Path) -> None:
    receptor = read_pdbqt(generate_receptor(tmp_path / 'r.pdbqt'))
    assert receptor.donor.any()
    assert receptor.acceptor.any()
    assert receptor.hydrophobic.any()
    ligand, rotatable = ligand_atoms('c1ccccc1CCO')
    assert rotatable == 2
    centre = receptor.xyz.mean(axis=0)
    inside, pose = dock(ligand, rotatable, receptor, centre, 6.0, starts=16, steps=20)
    assert inside < -1  # attracted into the pocket
    assert np.linalg.norm(pose.mean(axis=0) - centre) <= 6.0 * math.sqrt(3) / 2
    far, _ = dock(ligand, rotatable, receptor, centre + 100, 2.0, starts=4, steps=1)
    assert far == 0.0  # nothing within the 8 A cut-off


def test_docking_bad_inputs(tmp_path: pathlib.Path) -> None:
    (tmp_path / 'empty.pdbqt').write_text('REMARK nothing\n')
    with pytest.raises(InvalidArgumentError, match='no ATOM'):
        read_pdbqt(tmp_path / 'empty.pdbqt')
    with pytest.raises(InvalidArgumentError, match='SMILES'):
        ligand_atoms('C1CC')
    receptor = generate_receptor(tmp_path / 'r.pdbqt')
    assert math.isnan(simulate('C1CC', receptor, None, 10.0))
    few = tmp_path / 'few.csv'
    few.write_text('SMILES\nCCO\n')
    with pytest.raises(ValueError, match='fewer than'):
        DockingApp(few, receptor, initial_simulations=4).run(_engine(), tmp_path)


def test_docking_campaign(tmp_path: pathlib.Path) -> None:
    # Given files: four initial ligands, then the two the model predicts best.
    ligands = generate_ligands(tmp_path / 'in' / 'l.csv', count=12, seed=1)
    receptor = generate_receptor(tmp_path / 'in' / 'r.pdbqt', seed=1)
    config = DockingConfig(
        smi_file_name_ligand=ligands,
        receptor=receptor,
        tcl_path=tmp_path / 'unused.tcl',
        initial_simulations=4,
        num_iterations=2,
        batch_size=2,
        exhaustiveness=1,
    )
    with _engine() as engine:
        config.get_app().run(engine, tmp_path / 'run')
    with open(tmp_path / 'run' / 'docking.csv', encoding='utf-8') as f:
        rows = list(csv.DictReader(f))
    assert [int(r['iteration']) for r in rows] == [0] * 4 + [1] * 2 + [2] * 2
    assert len({r['smiles'] for r in rows}) == 8
    assert set(read_smiles(ligands)) >= {r['smiles'] for r in rows}
    assert not (tmp_path / 'run' / 'inputs').exists()
