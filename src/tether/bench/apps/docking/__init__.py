"""Protein docking: active learning of docking scores over a ligand set (TaPS's ``docking``).

The workflow TaPS runs (after ParslDock): dock ``initial_simulations`` random ligands
into the receptor, then ``num_iterations`` times train a k-nearest-neighbours model
(k = 4, Morgan fingerprints) on the scores so far, predict the rest and dock the
``batch_size`` best predicted. Results go to ``docking.csv`` (SMILES, score,
iteration). Docking is tether's rigid-ligand search with AutoDock Vina's score terms
(:mod:`._score`), not Vina itself: Vina's programs and its input preparation
(MGLTools, VMD) do not install here. Without ``smi_file_name_ligand`` or ``receptor``
the app writes synthetic inputs first (:func:`generate_ligands`, :func:`generate_receptor`).
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import math
import pathlib
import random
from typing import TYPE_CHECKING, Any

import numpy as np
import pydantic

from tether.bench.apps import AppConfig
from tether.bench.apps._common import HoldsNothing, at_least_four, write_csv
from tether.bench.registry import register

if TYPE_CHECKING:
    from tether.bench.engine import Engine

__all__ = [
    'DockingApp',
    'DockingAppConfig',
    'generate_ligands',
    'generate_receptor',
    'read_smiles',
    'simulate',
]

logger = logging.getLogger(__name__)


def generate_receptor(path: str | pathlib.Path, *, atoms: int = 90, seed: int = 0) -> pathlib.Path:
    """Write a synthetic receptor pocket as PDBQT: atoms on a half-open shell of radius 7 A.

    Carbons (``C``/``A``), acceptors (``OA``, ``NA``) and donors (``N`` with an ``HD``)
    line a cavity centred on the origin, open on one side so ligands can enter.
    """
    rng = np.random.default_rng(seed)
    lines = []
    serial = 1
    types = ['C', 'C', 'A', 'OA', 'NA', 'N']
    for _ in range(atoms):
        v = rng.normal(size=3)
        v /= np.linalg.norm(v)
        if v[2] > 0.6:
            v[2] = -v[2]
        xyz = v * rng.uniform(6.5, 8.0)
        ad = types[int(rng.integers(len(types)))]
        lines.append(_pdbqt_line(serial, ad, xyz))
        serial += 1
        if ad == 'N':
            lines.append(_pdbqt_line(serial, 'HD', xyz * (1 - 1.0 / np.linalg.norm(xyz))))
            serial += 1
    out = pathlib.Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text('\n'.join(lines) + '\nEND\n', encoding='utf-8')
    return out


def _pdbqt_line(serial: int, ad: str, xyz: np.ndarray) -> str:
    name = ad[0] if ad != 'HD' else 'H'
    return (
        f'ATOM  {serial:5d}  {name:<3} RES A   1    '
        f'{xyz[0]:8.3f}{xyz[1]:8.3f}{xyz[2]:8.3f}  1.00  0.00     0.000 {ad:<2}'
    )


def generate_ligands(path: str | pathlib.Path, *, count: int = 64, seed: int = 0) -> pathlib.Path:
    """Write ``count`` small molecules of RDKit's bundled NCI list as a ``SMILES`` CSV."""
    from tether.bench.apps.moldesign._tasks import search_space

    smiles = search_space(max_heavy_atoms=20, size=count, seed=seed)
    return write_csv(pathlib.Path(path), ['SMILES'], ({'SMILES': s} for s in smiles))


def read_smiles(path: str | pathlib.Path) -> list[str]:
    """SMILES of a CSV with a ``smiles`` column (any case), or the first word of each line."""
    with open(path, newline='', encoding='utf-8') as f:
        rows = list(csv.reader(f))
    if not rows:
        return []
    header = [h.strip().lower() for h in rows[0]]
    if 'smiles' in header:
        column = header.index('smiles')
        return [r[column].strip() for r in rows[1:] if len(r) > column and r[column].strip()]
    return [r[0].split()[0] for r in rows if r and r[0].strip()]


def simulate(
    smiles: str,
    receptor: pathlib.Path,
    center: tuple[float, float, float] | None,
    box: float,
    *,
    seed: int = 0,
    exhaustiveness: int = 8,
) -> float:
    """Dock one ligand; its best score (lower binds better), NaN if RDKit cannot build it."""
    from tether.bench.apps.docking._score import dock, ligand_atoms, read_pdbqt
    from tether.exceptions import InvalidArgumentError

    site = read_pdbqt(receptor)
    try:
        ligand, rotatable = ligand_atoms(smiles, seed)
    except InvalidArgumentError:
        logger.warning('docking: cannot build %s; scored NaN', smiles)
        return math.nan
    middle = site.xyz.mean(axis=0) if center is None else np.asarray(center, dtype=float)
    score, _ = dock(ligand, rotatable, site, middle, box, starts=8 * exhaustiveness, seed=seed)
    return score


@dataclasses.dataclass(eq=False)
class DockingApp(HoldsNothing):
    """Dock ligands into a receptor, choosing them by active learning.

    Args:
        smi_file_name_ligand_path: Ligand SMILES file (``None``: synthetic).
        receptor_path: Receptor PDBQT (``None``: synthetic pocket).
        tcl_path: TaPS's VMD script; accepted and unused (RDKit prepares ligands).
        initial_simulations: Ligands docked before the first model (at least 4).
        num_iterations: Train-predict-dock rounds.
        batch_size: Ligands docked a round.
        seed: Random seed.
        center: Search box centre (default: the receptor's centroid).
        box: Search box side (A).
        exhaustiveness: Search effort: ``8 * exhaustiveness`` random starts a ligand.
    """

    smi_file_name_ligand_path: pathlib.Path | None = None
    receptor_path: pathlib.Path | None = None
    tcl_path: pathlib.Path | None = None
    _: dataclasses.KW_ONLY
    initial_simulations: int = 8
    num_iterations: int = 3
    batch_size: int = 8
    seed: int = 0
    center: tuple[float, float, float] | None = None
    box: float = 20.0
    exhaustiveness: int = 8

    def __post_init__(self) -> None:
        at_least_four(self.initial_simulations, 'simulations')

    def _inputs(self, run_dir: pathlib.Path) -> tuple[list[str], pathlib.Path]:
        ligands = self.smi_file_name_ligand_path or generate_ligands(
            run_dir / 'inputs' / 'ligands.csv', seed=self.seed
        )
        receptor = self.receptor_path or generate_receptor(
            run_dir / 'inputs' / 'receptor.pdbqt',
            seed=self.seed,
        )
        smiles = list(dict.fromkeys(read_smiles(ligands)))
        if len(smiles) < self.initial_simulations:
            raise ValueError(
                f'{ligands} holds {len(smiles)} ligands, fewer than the '
                f'{self.initial_simulations} initial simulations',
            )
        return smiles, receptor

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Run the campaign; write ``docking.csv``."""
        from tether.bench.apps.moldesign._tasks import infer, train

        run_dir = pathlib.Path(run_dir)
        smiles, receptor = self._inputs(run_dir)
        rng = random.Random(self.seed)
        remaining = list(smiles)
        rng.shuffle(remaining)
        batch, remaining = (
            remaining[: self.initial_simulations],
            remaining[self.initial_simulations :],
        )
        scores: dict[str, float] = {}
        rows: list[dict[str, Any]] = []
        for iteration in range(self.num_iterations + 1):
            futures = {
                s: engine.submit(
                    simulate,
                    s,
                    receptor,
                    self.center,
                    self.box,
                    seed=self.seed,
                    exhaustiveness=self.exhaustiveness,
                )
                for s in batch
            }
            for s, future in futures.items():
                scores[s] = future.result()
                rows.append({'smiles': s, 'score': scores[s], 'iteration': iteration})
            logger.info('docking: round %d docked %d ligands', iteration, len(batch))
            if iteration == self.num_iterations or not remaining:
                break
            known = [(s, v) for s, v in scores.items() if not math.isnan(v)]
            model = engine.submit(train, [s for s, _ in known], [v for _, v in known])
            predicted = engine.submit(infer, model, remaining).result()
            order = sorted(range(len(remaining)), key=lambda i: predicted[i])
            chosen = set(order[: self.batch_size])
            batch = [remaining[i] for i in sorted(chosen)]
            remaining = [s for i, s in enumerate(remaining) if i not in chosen]
        write_csv(run_dir / 'docking.csv', ['smiles', 'score', 'iteration'], rows)
        scored = (r for r in rows if not math.isnan(r['score']))
        best = min(scored, key=lambda r: r['score'], default=None)
        logger.info('docking: %d ligands docked; best %s', len(rows), best)


@register('app')
class DockingAppConfig(AppConfig):
    """Active-learning docking campaign (TaPS's ``docking``); synthetic inputs by default."""

    name: str = 'docking'
    smi_file_name_ligand: pathlib.Path | None = pydantic.Field(
        default=None,
        description='ligand SMILES file (CSV with a SMILES column; default: synthetic)',
    )
    receptor: pathlib.Path | None = pydantic.Field(
        default=None,
        description='receptor PDBQT file (default: a synthetic pocket)',
    )
    tcl_path: pathlib.Path | None = pydantic.Field(
        default=None,
        description="TaPS's VMD script path (accepted, unused: RDKit prepares ligands)",
    )
    initial_simulations: int = pydantic.Field(
        default=8,
        description='Number of initial simulations (must be at least 4).',
    )
    num_iterations: int = pydantic.Field(default=3, ge=0, description='infer-simulate-train loops')
    batch_size: int = pydantic.Field(default=8, ge=1, description='simulations per iteration')
    seed: int = pydantic.Field(default=0, description='random seed')
    center: tuple[float, float, float] | None = pydantic.Field(
        default=None,
        description="search box centre (default: the receptor's centroid)",
    )
    box: float = pydantic.Field(default=20.0, gt=0, description='search box side (A)')
    exhaustiveness: int = pydantic.Field(
        default=8,
        ge=1,
        description='search effort: 8 random starts (each refined) per unit',
    )

    @pydantic.field_validator('initial_simulations')
    @classmethod
    def _at_least_four(cls, value: int) -> int:
        return at_least_four(value, 'simulations')

    def get_app(self) -> DockingApp:
        """Build the app."""
        return DockingApp(
            self.smi_file_name_ligand,
            self.receptor,
            **self._app_arguments(exclude={'smi_file_name_ligand', 'receptor'}),
        )
