"""The JSON-lines record logger: every record reaches the file, buffered or not."""

from __future__ import annotations

import pathlib

import pytest

from tether.bench.record import JSONRecordLogger, read_records


def lines(path: pathlib.Path) -> list[dict[str, object]]:
    return list(read_records(path)) if path.exists() else []


def test_records_are_buffered_then_flushed(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'runs' / 'tasks.jsonl'
    logger = JSONRecordLogger(path, flush_interval=3600)
    logger.log({'task_id': 'a'})  # the first record after a quiet spell: written at once
    assert [r['task_id'] for r in lines(path)] == ['a']
    logger.log({'task_id': 'b', 'value': pathlib.Path('x')})  # buffered (and not JSON)
    assert len(lines(path)) == 1
    logger.flush()
    assert lines(path)[1] == {'task_id': 'b', 'value': 'x'}
    logger.log({'task_id': 'c'})
    logger.close()
    assert [r['task_id'] for r in lines(path)] == ['a', 'b', 'c']
    logger.log({'task_id': 'late'})  # dropped after close, without an error
    assert len(lines(path)) == 3


def test_unbuffered_records(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'tasks.jsonl'
    logger = JSONRecordLogger(path, flush_interval=0)
    for i in range(3):
        logger.log({'task_id': str(i)})
        assert len(lines(path)) == i + 1
    logger.close()
    with pytest.raises(ValueError, match='flush_interval'):
        JSONRecordLogger(path, flush_interval=-1)
