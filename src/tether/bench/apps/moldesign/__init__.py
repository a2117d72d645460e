"""Molecular design: ML-guided search for molecules with high ionization potential (IP).

Simulation tasks compute a molecule's vertical IP with a real semi-empirical method:
RDKit builds and relaxes a 3D structure (ETKDG, then MMFF), and tblite's GFN2-xTB gives
the energies of the neutral molecule and its cation at that geometry (IP = E(cation) -
E(neutral), in eV). Training tasks fit a k-nearest-neighbours regressor (Tanimoto
similarity) on Morgan fingerprints of the molecules simulated so far; inference tasks
score the rest of the search space in chunks; the client then simulates the
``batch_size`` best-scored molecules, until ``search_count`` molecules are simulated. Results go to
``moldesign.csv`` in the run directory.

The search space is drawn from the NCI compound list that ships inside RDKit
(``rdkit/Data/NCI/first_5K.smi``), restricted QM9-style to small neutral molecules of
C, H, N, O and F with at most ``max_heavy_atoms`` heavy atoms. (The seed samples QM9
itself, which does not ship in any package.)
"""

from __future__ import annotations

import dataclasses
import logging
import math
import pathlib
import random
from typing import TYPE_CHECKING, Any

import pydantic

from tether.bench.apps import AppConfig
from tether.bench.apps._common import HoldsNothing, at_least_four, write_csv
from tether.bench.registry import register

if TYPE_CHECKING:
    from tether.bench.engine import Engine

__all__ = ['MolDesignApp', 'MolDesignAppConfig']

logger = logging.getLogger(__name__)


@dataclasses.dataclass(kw_only=True, eq=False)
class MolDesignApp(HoldsNothing):
    """Active learning over a search space of small molecules (see the module docstring)."""

    search_size: int = 200
    initial_count: int = 8
    batch_size: int = 4
    search_count: int = 16
    infer_chunks: int = 4
    max_heavy_atoms: int = 9
    seed: int = 0
    dataset: str | pathlib.Path | None = None

    def __post_init__(self) -> None:
        if self.initial_count > self.search_count:
            raise ValueError('initial_count must not exceed search_count')
        if self.dataset is not None:
            self.dataset = pathlib.Path(self.dataset).absolute()

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Run the campaign; write ``moldesign.csv``."""
        from tether.bench.apps.moldesign import _tasks

        space = _tasks.search_space(
            self.max_heavy_atoms, self.search_size, self.seed, self.dataset
        )
        if len(space) < self.search_count:
            raise ValueError(
                f'the search space has {len(space)} molecules, fewer than search_count',
            )
        rng = random.Random(self.seed)
        todo = list(space)
        rng.shuffle(todo)
        results: dict[str, float] = {}
        rows: list[dict[str, Any]] = []

        def simulate(batch: list[str], round_: int) -> None:
            futures = [engine.submit(_tasks.compute_ip, s, self.seed) for s in batch]
            for smiles, future in zip(batch, futures, strict=True):
                ip = future.result()
                results[smiles] = ip
                rows.append({'round': round_, 'smiles': smiles, 'ip': ip})

        first = todo[: self.initial_count]
        simulate(first, 0)
        round_ = 0
        while len(results) < self.search_count:
            round_ += 1
            known = {s: ip for s, ip in results.items() if not math.isnan(ip)}  # failed: NaN
            model = engine.submit(_tasks.train, list(known), list(known.values()))
            remaining = [s for s in space if s not in results]
            size = max(1, -(-len(remaining) // self.infer_chunks))
            chunks = [remaining[i : i + size] for i in range(0, len(remaining), size)]
            scored: list[tuple[float, str]] = []
            for chunk, future in zip(
                chunks,
                [engine.submit(_tasks.infer, model, c) for c in chunks],
                strict=True,
            ):
                scored.extend(zip(future.result(), chunk, strict=True))
            scored.sort(reverse=True)
            count = min(self.batch_size, self.search_count - len(results))
            simulate([s for _, s in scored[:count]], round_)
        write_csv(run_dir / 'moldesign.csv', ['round', 'smiles', 'ip'], rows)
        best = max(
            (r for r in rows if not math.isnan(r['ip'])), key=lambda r: r['ip'], default=None
        )
        if best is not None:
            logger.info(
                'moldesign: %d simulated in %d rounds; best %s (IP %.2f eV)',
                len(rows),
                round_ + 1,
                best['smiles'],
                best['ip'],
            )


@register('app')
class MolDesignAppConfig(AppConfig):
    """ML-guided search for high-IP molecules (RDKit, GFN2-xTB via tblite, k-NN)."""

    name: str = 'moldesign'
    search_size: int = pydantic.Field(
        default=200, ge=1, description='molecules in the search space'
    )
    initial_count: int = pydantic.Field(
        default=8, description='random molecules simulated first (at least 4)'
    )
    batch_size: int = pydantic.Field(default=4, ge=1, description='molecules simulated per round')
    search_count: int = pydantic.Field(
        default=16, ge=1, description='molecules simulated in total'
    )
    infer_chunks: int = pydantic.Field(default=4, ge=1, description='inference tasks per round')
    max_heavy_atoms: int = pydantic.Field(
        default=9, ge=1, description='largest molecule (heavy atoms)'
    )
    seed: int = pydantic.Field(default=0, description='random seed')

    @pydantic.field_validator('initial_count')
    @classmethod
    def _at_least_four(cls, value: int) -> int:
        return at_least_four(value, 'calculations')

    dataset: pathlib.Path | None = pydantic.Field(
        default=None,
        description="SMILES file of the search space (default: RDKit's NCI list)",
    )

    def get_app(self) -> MolDesignApp:
        """Build the app."""
        return MolDesignApp(**self._app_arguments())
