"""Running one benchmark: the run directory, the engine, the app, the summary."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import time
from typing import Any

from tether.bench.engine import Engine, EngineStats
from tether.bench.run._env import environment
from tether.bench.run._progress import progress
from tether.bench.run.config import BenchmarkConfig, make_run_dir

__all__ = ['make_run_dir', 'run']

logger = logging.getLogger(__name__)


def run(
    config: BenchmarkConfig,
    run_dir: str | os.PathLike[str],
    *,
    show_progress: bool = False,
) -> dict[str, Any]:
    """Run ``config``'s app in ``run_dir``; return (and write) the run summary.

    The directory receives ``config.toml`` (the merged configuration, secrets redacted),
    ``environment.json``, the task records, the app's outputs and ``summary.json``
    (makespan: from building the executor to its shutdown).

    Raises:
        Exception: whatever the application raised (after the summary is written).
    """
    run_dir = pathlib.Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config.write_toml(run_dir / 'config.toml')
    (run_dir / 'environment.json').write_text(json.dumps(environment(), indent=2) + '\n')
    engine_box: list[Engine] = []

    def stats() -> EngineStats | None:
        return engine_box[0].stats() if engine_box else None

    logger.info('run directory: %s', run_dir)
    error: BaseException | None = None
    start = time.time()
    try:
        with progress(stats, enabled=show_progress):
            app = config.app.get_app()
            with contextlib.closing(app):
                engine = config.engine.get_engine(run_dir)
                engine_box.append(engine)
                with engine:
                    app.run(engine, run_dir)
    except BaseException as e:
        error = e
        raise
    finally:
        end = time.time()
        final = stats()
        summary = {
            'app': config.app.name,
            'executor': config.engine.executor.name,
            'workers': config.engine.executor.get_workers(),
            'transformer': config.engine.transformer.name if config.engine.transformer else None,
            'filter': config.engine.filter.name if config.engine.filter else None,
            'start_time': start,
            'end_time': end,
            'makespan': end - start,
            'tasks': None if final is None else final._asdict(),
            'success': error is None,
            'error': None if error is None else f'{type(error).__name__}: {error}',
            'run_dir': str(run_dir),
        }
        (run_dir / 'summary.json').write_text(json.dumps(summary, indent=2) + '\n')
        logger.info(
            'makespan %.3f s (%s)', summary['makespan'], 'ok' if error is None else 'failed'
        )
    return summary
