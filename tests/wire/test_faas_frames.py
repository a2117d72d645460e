"""The function service's task records: checked once when a frame is decoded."""

from __future__ import annotations

from typing import Any

import pytest

from tether.exceptions import ProtocolError
from tether.faas import _frames

TASK = _frames.TaskMessage('t1', 'f1', 'g1', 'json', None, 10, 5.0, {'client_sent': 1.0})


def test_a_task_message_round_trips_through_a_tasks_frame() -> None:
    frame = _frames.decode(
        _frames.encode(_frames.TASKS, {'tasks': [_frames.encode_task(TASK)]}, [b'p'])
    )
    [(task, payload)] = _frames.decode_tasks(frame)
    assert task == TASK
    assert bytes(payload) == b'p'
    assert 'timeout' not in _frames.encode_task(TASK._replace(timeout=None))


@pytest.mark.parametrize(
    ('entry', 'match'),
    [
        ({'function_id': 'f'}, "without the field 'task_id'"),
        ({'task_id': 't', 'function_id': 3}, "'function_id' must be str"),
        ({'task_id': 't', 'function_id': 'f', 'result_store': 'x'}, "'result_store' must be dict"),
        (
            {'task_id': 't', 'function_id': 'f', 'timeout': 'soon'},
            "'timeout' must be int or float",
        ),
    ],
)
def test_malformed_task_messages_are_protocol_errors(entry: dict[str, Any], match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        _frames.decode_task(entry)


def test_a_tasks_frame_needs_one_payload_per_task() -> None:
    frame = _frames.decode(_frames.encode(_frames.TASKS, {'tasks': [_frames.encode_task(TASK)]}))
    with pytest.raises(ProtocolError, match='one payload per entry'):
        _frames.decode_tasks(frame)
    frame = _frames.decode(_frames.encode(_frames.TASKS, {'tasks': ['x']}, [b'']))
    with pytest.raises(ProtocolError, match='must be an object'):
        list(_frames.decode_tasks(frame))


def test_task_ids_and_submissions() -> None:
    assert _frames.decode_task_ids({'task_ids': ['a', 'b']}) == ['a', 'b']
    with pytest.raises(ProtocolError, match='list of task id strings'):
        _frames.decode_task_ids({'task_ids': [1]})
    entry = {'task_id': 't', 'function_id': 'f', 'endpoint_id': 'e', 'timeout': 3}
    submission = _frames.decode_submission({'tasks': [entry], 'task_group_id': ''}, 1)
    assert submission.task_group_id is None
    assert submission.tasks[0].endpoint_id == 'e'
    assert submission.tasks[0].timeout == 3
    with pytest.raises(ProtocolError, match="without the field 'endpoint_id'"):
        _frames.decode_submission({'tasks': [{'task_id': 't', 'function_id': 'f'}]}, 1)
