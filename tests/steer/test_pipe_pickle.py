"""PipeQueues pickled into processes forked after them (a Pool task, a Process argument)."""

from __future__ import annotations

import gc
import multiprocessing
import pickle
import warnings

import pytest

from tether.exceptions import SteerQueueError
from tether.steer import PipeQueues

_FORK = multiprocessing.get_context('fork')


def _take_and_answer(data: bytes) -> None:
    queues = pickle.loads(data)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the client-side call warns in a server's role
        _, task = queues.get_task(timeout=60)
    assert task.method == 'child'
    task.deserialize()
    task.set_result(task.args[0] * 2)
    task.serialize()
    queues.send_result(task)


def test_pickled_into_a_forked_process() -> None:
    queues = PipeQueues(['a'])
    data = pickle.dumps(queues)
    assert len(data) < 200  # the id only, not the pipes
    assert pickle.loads(data) is queues  # in this process: the same queues
    process = _FORK.Process(target=_take_and_answer, args=(data,))
    process.start()
    queues.send_inputs(21, method='child', topic='a')
    result = queues.get_result('a', timeout=60)
    process.join(60)
    assert process.exitcode == 0
    assert result.value == 42


def test_a_pool_task_reads_and_answers_through_them() -> None:
    queues = PipeQueues(['a'])
    with _FORK.Pool(1) as pool:
        queues.send_inputs(5, method='m', topic='a')
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            topic, task = pool.apply(queues.get_task, (60,))
        assert topic == 'a'
        task.deserialize()
        task.set_result(task.args[0] + 1)
        task.serialize()
        pool.apply(queues.send_result, (task,))
        assert queues.get_result('a', timeout=60).value == 6


def test_unpickled_where_not_inherited_is_refused() -> None:
    data = pickle.dumps(PipeQueues())
    gc.collect()  # the queues are gone: no process holds them
    with pytest.raises(SteerQueueError, match='did not inherit them'):
        pickle.loads(data)
