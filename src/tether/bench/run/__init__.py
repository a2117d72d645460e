"""Benchmark runs: configuration, run directories, and the ``tether bench`` command.

``tether bench run --app cholesky --executor thread-pool --app.matrix_size 100`` (or
``-c config.toml``) validates a :class:`~tether.bench.run.config.BenchmarkConfig`,
creates a run directory and calls :func:`run`. The same from Python::

    config = BenchmarkConfig.from_dict({'app': {'name': 'synthetic'}, 'engine': {...}})
    run(config, make_run_dir(config))
"""

from __future__ import annotations

from tether.bench.run._main import make_run_dir, run
from tether.bench.run.config import BenchmarkConfig

__all__ = ['BenchmarkConfig', 'make_run_dir', 'run']
