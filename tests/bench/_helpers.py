"""Checks shared by the benchmark-suite tests."""

from __future__ import annotations

import pathlib
from typing import Any

from tether.bench.record import read_records

RECORD_KEYS = {
    'task_id',
    'function_name',
    'parent_task_ids',
    'submit_time',
    'received_time',
    'input_transform_time',
    'success',
    'exception',
    'execution',
}


def check_records(path: pathlib.Path, *, all_succeed: bool = True) -> list[dict[str, Any]]:
    """Records are complete, and every parent finished before its children started."""
    records = list(read_records(path))
    assert records, f'no records in {path}'
    by_id = {r['task_id']: r for r in records}
    assert len(by_id) == len(records), 'task ids are not unique'
    for r in records:
        assert set(r) == RECORD_KEYS, set(r) ^ RECORD_KEYS
        if all_succeed:
            assert r['success'], r['exception']
        assert r['received_time'] >= r['submit_time']
        ex = r['execution']
        if r['success']:
            assert ex is not None
            assert ex['execution_end_time'] >= ex['execution_start_time']
            assert ex['hostname']
            assert ex['pid'] > 0
        for parent_id in r['parent_task_ids']:
            parent = by_id[parent_id]
            if r['success']:
                # Clocks of one machine: the parent ended before the child started.
                assert parent['execution']['execution_end_time'] <= ex['execution_start_time']
    return records
