"""Tiled Cholesky factorisation: POTRF, TRSM, SYRK and GEMM tasks over a block matrix.

Given a random ``N x N`` matrix ``B``, factorises ``A = (B + B^T) + N I`` (positive
definite) into ``L`` with ``A = L L^T``; tiles are ``block_size`` square. The result is
checked against ``A`` and the error logged.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
from typing import TYPE_CHECKING, Any, Self, cast

import numpy as np
import pydantic

from tether.bench.apps import AppConfig
from tether.bench.apps._common import HoldsNothing
from tether.bench.registry import register

if TYPE_CHECKING:
    from tether.bench.engine import Engine

__all__ = ['CholeskyApp', 'CholeskyAppConfig', 'gemm', 'potrf', 'syrk', 'trsm']

logger = logging.getLogger(__name__)


def potrf(tile: np.ndarray) -> np.ndarray:
    """Cholesky factor of a diagonal tile."""
    return cast('np.ndarray', np.linalg.cholesky(tile))


def trsm(lower: np.ndarray, tile: np.ndarray) -> np.ndarray:
    """Solve ``X L^T = tile`` for ``X``."""
    return cast('np.ndarray', np.linalg.solve(lower, tile.T).T)


def syrk(tile: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """Symmetric rank-k update ``tile - L L^T``."""
    return cast('np.ndarray', tile - lower @ lower.T)


def gemm(tile: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``tile - a b^T``."""
    return cast('np.ndarray', tile - a @ b.T)


@dataclasses.dataclass(eq=False)
class CholeskyApp(HoldsNothing):
    """Tiled Cholesky factorisation of a random positive-definite matrix.

    Args:
        matrix_size: Side of the matrix.
        block_size: Side of a tile (the last row and column of tiles may be smaller).
        seed: Random seed of the matrix.
    """

    matrix_size: int
    block_size: int
    seed: int = 0

    def __post_init__(self) -> None:
        if self.matrix_size < 1 or self.block_size < 1:
            raise ValueError('The matrix size and block size must be greater than 0.')
        if self.block_size > self.matrix_size:
            raise ValueError('The matrix size must be greater than or equal to the block size.')

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Factorise; write ``cholesky.npy`` (L) to ``run_dir`` and log the error."""
        n, b = self.matrix_size, self.block_size
        rng = np.random.default_rng(self.seed)
        m = rng.random((n, n))
        matrix = (m + m.T) + n * np.eye(n)
        edges = [*range(0, n, b), n]
        nt = len(edges) - 1

        def tile(i: int, j: int) -> np.ndarray:
            return np.ascontiguousarray(matrix[edges[i] : edges[i + 1], edges[j] : edges[j + 1]])

        tiles: dict[tuple[int, int], Any] = {
            (i, j): tile(i, j) for i in range(nt) for j in range(i + 1)
        }
        for k in range(nt):
            tiles[k, k] = engine.submit(potrf, tiles[k, k])
            for i in range(k + 1, nt):
                tiles[i, k] = engine.submit(trsm, tiles[k, k], tiles[i, k])
            for i in range(k + 1, nt):
                for j in range(k + 1, i):
                    tiles[i, j] = engine.submit(gemm, tiles[i, j], tiles[i, k], tiles[j, k])
                tiles[i, i] = engine.submit(syrk, tiles[i, i], tiles[i, k])
        lower = np.zeros_like(matrix)
        for (i, j), value in tiles.items():
            result = value.result() if hasattr(value, 'result') else value
            lower[edges[i] : edges[i + 1], edges[j] : edges[j + 1]] = result
        error = float(np.abs(lower @ lower.T - matrix).max())
        logger.info('cholesky %dx%d (blocks %d): max |LL^T - A| = %.3g', n, n, b, error)
        run_dir.mkdir(parents=True, exist_ok=True)
        np.save(run_dir / 'cholesky.npy', lower)
        if not error < 1e-6 * n:
            raise ArithmeticError(f'cholesky result is wrong: max |LL^T - A| = {error}')


@register('app')
class CholeskyAppConfig(AppConfig):
    """Tiled Cholesky factorisation (linear algebra; a DAG that grows with the tiles)."""

    name: str = 'cholesky'
    matrix_size: int = pydantic.Field(default=100, description='side of the matrix')
    block_size: int = pydantic.Field(
        default=25, description='side of a tile (at most matrix_size)'
    )
    seed: int = pydantic.Field(default=0, description='random seed')

    @pydantic.field_validator('matrix_size', 'block_size')
    @classmethod
    def _positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError('The matrix size and block size must be greater than 0.')
        return value

    @pydantic.model_validator(mode='after')
    def _block_fits(self) -> Self:
        if self.block_size > self.matrix_size:
            raise ValueError('The matrix size must be greater than or equal to the block size.')
        return self

    def get_app(self) -> CholeskyApp:
        """Build the app."""
        return CholeskyApp(**self._app_arguments())
