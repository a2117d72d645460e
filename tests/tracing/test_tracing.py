"""OpenTelemetry traces: store operations, a proxy resolved in another process joining
its creation's trace, and the lifetimes of a steering task and a function-service task."""

from __future__ import annotations

import itertools
import os
import pathlib
import pickle
import subprocess
import sys
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.steer import _tasks as steer_tasks
from tether import _tracing, tracing
from tether.connectors.file import FileConnector
from tether.exceptions import ConfigError
from tether.proxy import get_factory
from tether.steer import LocalTaskServer, PipeQueues
from tether.store import Store
from tether.testing.steer import serving


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.name, []).append(span)
    return out


def test_off_by_default_records_nothing(tmp_path: pathlib.Path) -> None:
    assert not tracing.is_enabled()
    with Store('off', FileConnector(str(tmp_path))) as store:
        proxy = store.proxy([1, 2, 3])
        factory = get_factory(proxy)
        assert factory.trace is None  # type: ignore[attr-defined]
        # The pickled proxy carries nothing more than without tracing.
        assert len(factory.__reduce__()[1]) == 4  # type: ignore[attr-defined]


def test_store_operations_are_spans(spans: InMemorySpanExporter, tmp_path: pathlib.Path) -> None:
    with Store('ops', FileConnector(str(tmp_path))) as store:
        key = store.put(b'x' * 1000)
        assert store.get(key) == b'x' * 1000
        store.evict(key)
    names = by_name(spans)
    (put,) = names['store.put']
    assert put.attributes['tether.store'] == 'ops'
    assert put.attributes['tether.bytes'] >= 1000
    assert put.end_time >= put.start_time
    assert 'store.get' in names
    assert 'store.evict' in names


RESOLVE = """
import pickle, sys
proxy = pickle.loads(open(sys.argv[1], 'rb').read())
assert sum(proxy) == 6
"""


def test_a_proxy_resolved_in_another_process_joins_its_trace(
    spans: InMemorySpanExporter, tmp_path: pathlib.Path
) -> None:
    data = tmp_path / 'data'
    out = tmp_path / 'spans.jsonl'
    with Store('joined', FileConnector(str(data)), register=True) as store:
        proxy = store.proxy([1, 2, 3])
        (made,) = by_name(spans)['store.proxy']
        (tmp_path / 'proxy.pkl').write_bytes(pickle.dumps(proxy))
        env = {**os.environ, 'TETHER_TRACING': f'file:{out}'}
        subprocess.run(
            [sys.executable, '-c', RESOLVE, str(tmp_path / 'proxy.pkl')], env=env, check=True
        )
    found = {s['name']: s for s in tracing.read_spans(out)}
    resolve, get = found['tether.proxy.resolve'], found['store.get']
    context = made.get_span_context()
    assert resolve['trace_id'] == f'{context.trace_id:032x}'
    assert resolve['parent_id'] == f'{context.span_id:016x}'
    assert resolve['pid'] != os.getpid()
    # The store.get inside the resolution is its child, in the same trace.
    assert get['trace_id'] == resolve['trace_id']
    assert get['parent_id'] == resolve['span_id']


def test_a_steering_tasks_lifetime_is_a_trace(spans: InMemorySpanExporter) -> None:
    queues = PipeQueues()
    with serving(LocalTaskServer(queues, [steer_tasks.add], num_workers=1)):
        queues.send_inputs(1, 2, method='add')
        result = queues.get_result(timeout=60)
    assert result.success
    names = by_name(spans)
    (root,) = names['tether.steer.task']
    assert root.attributes['tether.task_id'] == result.task_id
    steps = [s for s in spans.get_finished_spans() if s.parent is not None]
    steps = [s for s in steps if s.parent.span_id == root.get_span_context().span_id]
    stages = [(s.attributes['tether.stage.from'], s.attributes['tether.stage.to']) for s in steps]
    # The steps follow one another from the Thinker's 'created' to its 'result_received'.
    assert stages[0][0] == 'created'
    assert stages[-1][1] == 'result_received'
    assert all(a[1] == b[0] for a, b in itertools.pairwise(stages))
    assert ('compute_started', 'compute_ended') in stages
    assert root.start_time <= min(s.start_time for s in steps)
    assert root.end_time >= max(s.end_time for s in steps)


def test_a_bad_setting_is_a_clear_error() -> None:
    env = {**os.environ, 'TETHER_TRACING': 'sideways'}
    run = subprocess.run(
        [sys.executable, '-c', 'import tether.store'],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode != 0
    assert 'TETHER_TRACING' in run.stderr
    assert 'ConfigError' in run.stderr
    with pytest.raises(ConfigError, match='file:PATH, otlp, on or off'):
        _tracing._enable_from_env('sideways')
