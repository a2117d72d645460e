"""Steering campaigns and bench runs, from their result files.

A steering campaign is a folder of ``*.jsonl`` files, one :func:`steer_record` of a
finished task per line (a Thinker's result processor appends them with
:func:`append_steer_record`). A bench run is a ``tether bench`` run directory
(``summary.json``, ``tasks.jsonl``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from collections.abc import Iterator
from typing import Any

__all__ = [
    'BenchRun',
    'append_steer_record',
    'bench_runs',
    'read_jsonl',
    'steer_records',
    'steer_record',
    'steer_series',
    'step_series',
]

# Result files larger than this are read only up to it (a page must stay quick).
MAX_FILE_BYTES = 64 * 2**20


def steer_record(result: Any) -> dict[str, Any]:
    """The JSON record of a steering :class:`~tether.steer.models.Result`: its task id,
    topic, method, success, resources, timestamps and timings (no inputs or value)."""
    return {
        'task_id': result.task_id,
        'topic': result.topic,
        'method': result.method,
        'success': result.success,
        'resources': dataclasses.asdict(result.resources),
        'timestamp': dataclasses.asdict(result.timestamp),
    }


def append_steer_record(path: str | os.PathLike[str], result: Any) -> None:
    """Append :func:`steer_record` of ``result`` to the JSON-lines file ``path``."""
    with open(path, 'a', encoding='utf-8') as f:
        f.write(json.dumps(steer_record(result)) + '\n')


def read_jsonl(path: pathlib.Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines file (a line that is not one is skipped: the
    last line may be half written)."""
    with open(path, 'rb') as f:
        data = f.read(MAX_FILE_BYTES)
    for line in data.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def steer_records(folder: str) -> list[dict[str, Any]]:
    """Every record of the campaign in ``folder``."""
    records: list[dict[str, Any]] = []
    for path in sorted(pathlib.Path(folder).expanduser().glob('*.jsonl')):
        records.extend(read_jsonl(path))
    return records


def step_series(events: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """A step series of the running sum of ``(time, change)`` events."""
    xs: list[float] = []
    ys: list[float] = []
    level = 0.0
    for t, change in sorted(events):
        level += change
        if xs and xs[-1] == t:
            ys[-1] = level
        else:
            xs.append(t)
            ys.append(level)
    return xs, ys


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def steer_series(
    records: list[dict[str, Any]],
) -> tuple[dict[str, tuple[list[float], list[float]]], dict[str, tuple[list[float], list[float]]]]:
    """``(in_flight, ranks)``: per topic, tasks in flight (created until their result
    was received) and ranks in use (``node_count * cpu_processes`` of tasks computing)
    over time, as step series."""
    flight: dict[str, list[tuple[float, float]]] = {}
    ranks: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        topic = str(r.get('topic') or 'default')
        ts = r.get('timestamp') if isinstance(r.get('timestamp'), dict) else {}
        assert isinstance(ts, dict)
        created = _number(ts.get('created'))
        done = _number(ts.get('result_received')) or _number(ts.get('compute_ended'))
        if created is not None and done is not None:
            flight.setdefault(topic, []).extend([(created, 1.0), (done, -1.0)])
        start, end = _number(ts.get('compute_started')), _number(ts.get('compute_ended'))
        res = r.get('resources') if isinstance(r.get('resources'), dict) else {}
        assert isinstance(res, dict)
        n = float((_number(res.get('node_count')) or 1) * (_number(res.get('cpu_processes')) or 1))
        if start is not None and end is not None:
            ranks.setdefault(topic, []).extend([(start, n), (end, -n)])
    return (
        {t: step_series(e) for t, e in sorted(flight.items())},
        {t: step_series(e) for t, e in sorted(ranks.items())},
    )


@dataclasses.dataclass
class BenchRun:
    """A ``tether bench`` run directory."""

    name: str
    path: pathlib.Path
    summary: dict[str, Any]

    def tasks(self) -> list[dict[str, Any]]:
        path = self.path / 'tasks.jsonl'
        return list(read_jsonl(path)) if path.is_file() else []


def bench_runs(folders: list[str]) -> list[BenchRun]:
    """The run directories (with a ``summary.json``) in ``folders``, newest first."""
    runs = []
    for folder in folders:
        root = pathlib.Path(folder).expanduser()
        candidates = [root, *root.iterdir()] if root.is_dir() else []
        for d in candidates:
            summary_file = d / 'summary.json'
            if not summary_file.is_file():
                continue
            try:
                summary = json.loads(summary_file.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(summary, dict):
                runs.append(BenchRun(d.name, d, summary))
    runs.sort(key=lambda r: -float(r.summary.get('start_time') or 0))
    return runs
