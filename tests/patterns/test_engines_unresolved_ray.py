"""Ray ``remote`` passes an unresolved proxy through the submitting process unresolved.

The same check as ``test_engines_unresolved.py``, on a local Ray node of one CPU
(``ray.init``) started for this module.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.patterns import _guard
from tests.patterns._guard import Engine, check_passes_unresolved
from tether.store import Store

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope='module')
def ray_module() -> Iterator[Any]:
    ray = pytest.importorskip('ray')
    # Ray's workers inherit the node's environment: they import the test modules by name.
    old = os.environ.get('PYTHONPATH')
    os.environ['PYTHONPATH'] = os.pathsep.join(p for p in (str(ROOT), old) if p)
    try:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    finally:
        if old is None:
            os.environ.pop('PYTHONPATH', None)
        else:
            os.environ['PYTHONPATH'] = old
    yield ray
    ray.shutdown()


def test_ray_remote(store: Store[Any], ray_module: Any) -> None:
    ray = ray_module
    remote = {
        fn: ray.remote(fn) for fn in (_guard.consume, _guard.set_result, _guard.make_proxies)
    }
    # One CPU: a consumer waiting for a future would hold it, so tasks of the future
    # round take no CPU (they wait on Redis, not compute).
    engine = Engine(
        lambda fn, *args: remote[fn].options(num_cpus=0).remote(*args),
        lambda ref: ray.get(ref, timeout=60),
    )

    def make(config: Any, pid: int) -> Any:
        return engine.result(engine.submit(_guard.make_proxies, config, pid))

    check_passes_unresolved(engine, store, make)
