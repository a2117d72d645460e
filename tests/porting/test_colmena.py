"""Colmena's call shapes on tether.steer (docs/porting.md, "Porting from Colmena")."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Generator
from typing import Any

import pytest

from tether.steer.methods import ExecutableMethod, PythonGeneratorMethod, PythonMethod
from tether.steer.models import ResourceRequirements, Result, SerializationMethod
from tether.steer.queue import PipeQueues
from tether.steer.queue.base import QueueRole
from tether.steer.task_server import LocalTaskServer
from tether.steer.thinker import ResourceCounter
from tether.steer.thinker.resources import ReallocatorThread
from tether.testing import wait_until


def triple(x: int) -> int:
    return 3 * x


def counting(n: int) -> Generator[int, None, int]:
    yield from range(n)
    return n


@pytest.fixture
def queues() -> PipeQueues:
    return PipeQueues(['a', 'b'], secret=False)


def test_topics_are_a_set_with_default(queues: PipeQueues) -> None:
    assert queues.topics == {'a', 'b', 'default'}


def test_get_task_returns_topic_and_packed_request(queues: PipeQueues) -> None:
    queues.send_inputs('x', method='m', input_kwargs={'k': 1}, topic='b')
    topic, task = queues.get_task(timeout=10)
    assert topic == 'b'
    assert task.deserialize() >= 0
    assert task.args == ('x',)
    assert task.kwargs == {'k': 1}
    task.set_result('done')
    task.serialize()
    queues.send_result(task)
    assert queues.get_result('b', timeout=10).value == 'done'


def test_roles_warn_about_the_other_sides_calls(queues: PipeQueues) -> None:
    assert queues.role == QueueRole.ANY
    with pytest.raises(ValueError, match='asdf'):
        queues.set_role('asdf')
    queues.set_role('client')
    queues.send_inputs(1, method='m')  # a client's call: no warning
    with pytest.warns(UserWarning, match='get_task'):
        queues.get_task(timeout=10)
    queues.set_role('any')
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        queues.send_inputs(1, method='m')
        queues.get_task(timeout=10)


def test_json_serialization_refuses_what_json_cannot_encode() -> None:
    queues = PipeQueues(serialization_method=SerializationMethod.JSON, secret=False)
    with pytest.raises(TypeError):
        queues.send_inputs(object(), method='m')
    queues.send_inputs((1, 2), method='m')
    _, task = queues.get_task(timeout=10)
    task.deserialize()
    assert task.args == ([1, 2],)  # JSON has no tuples
    assert task.serialization_method == 'json'


def test_flush_drops_waiting_requests_and_results(queues: PipeQueues) -> None:
    from tether.exceptions import SteerTimeoutError

    queues.send_inputs(1, method='m')
    queues.flush()
    with pytest.raises(SteerTimeoutError):
        queues.get_task(timeout=0.05)
    queues.send_inputs(1, method='m')
    _, task = queues.get_task(timeout=10)
    queues.send_result(task)
    queues.flush()
    with pytest.raises(SteerTimeoutError):
        queues.get_result(timeout=0.05)


def test_send_inputs_without_method_runs_the_only_method() -> None:
    queues = PipeQueues(secret=False)
    server = LocalTaskServer(queues, [triple], num_workers=1)
    server.start()
    try:
        queues.send_inputs(5)
        result = queues.get_result(timeout=60)
        assert result.success, result.failure_info
        assert result.value == 15
        assert result.method == 'triple'
    finally:
        queues.send_kill_signal()
        server.join(60)


def test_result_from_args_and_kwargs_serialize_round_trip() -> None:
    result = Result.from_args_and_kwargs((1, 'a'), {'k': [2]}, method='m', keep_inputs=False)
    seconds, proxies = result.serialize()
    assert seconds >= 0
    assert proxies == []
    assert 'inputs' in result.message_sizes
    result.deserialize()
    assert result.args == (1, 'a')
    assert result.kwargs == {'k': [2]}
    result.set_result(7)
    assert result.inputs == ((), {})  # keep_inputs=False: dropped with the value set
    assert result.complete
    assert result.success
    result.set_result(8, intermediate=True)
    assert result.complete is False


def test_python_methods_are_named_and_run_a_request() -> None:
    assert PythonMethod(triple).name == 'triple'
    assert PythonMethod(triple, name='t').name == 't'
    assert PythonMethod(triple)(2) == 6  # called like its function
    request = Result.from_args_and_kwargs((4,), method='triple')
    request.serialize()
    done = PythonMethod(triple)(request)
    assert done.success
    assert done.time.running is not None
    done.deserialize()
    assert done.value == 12
    with pytest.raises(Exception, match='callable'):
        PythonMethod(3)  # type: ignore[arg-type]


def test_generator_methods_collect_or_stream(queues: PipeQueues) -> None:
    assert PythonGeneratorMethod(counting)(3) == [0, 1, 2]
    assert PythonGeneratorMethod(counting, store_return_value=True)(2) == [[0, 1], 2]
    streaming = PythonGeneratorMethod(counting, store_return_value=True, streaming_queue=queues)
    request = Result.from_args_and_kwargs((2,), method='counting', topic='a')
    done = streaming(request)
    done.deserialize()
    assert done.value == 2
    assert done.complete
    parts = [queues.get_result('a', timeout=10) for _ in range(2)]
    assert [(p.value, p.complete) for p in parts] == [(0, False), (1, False)]


def test_executable_method_is_named_after_its_program() -> None:
    class Echo(ExecutableMethod):
        def __init__(self) -> None:
            super().__init__(['echo'])

        def preprocess(self, run_dir: Any, args: Any, kwargs: Any) -> tuple[list[str], None]:
            return [str(a) for a in args], None

        def postprocess(self, run_dir: Any) -> Any:
            return (run_dir / 'colmena.stdout').read_text()  # Colmena's name for stdout

    assert Echo().name == 'echo'
    request = Result.from_args_and_kwargs(('hi',), method='echo')
    done = Echo()(request)
    assert done.time.additional['exec_execution'] > 0  # Colmena's step timings
    done.deserialize()
    assert done.success
    assert done.value == 'hi\n'


def test_release_defaults_and_rerequest() -> None:
    rec = ResourceCounter(2, ['sim'])
    assert rec.acquire(None, 2)
    assert rec.release() is None  # one slot back to the unallocated pool
    assert rec.available_slots(None) == 1
    assert rec.release(None, 1, rerequest=True, timeout=-1) is True
    assert rec.available_slots(None) == 1  # released, then taken again
    rec.release(None, 1)
    assert rec.acquire(None, 2, timeout=-1)  # -1: wait without a limit (Colmena's spelling)


def test_reallocate_in_the_background_calls_back() -> None:
    rec = ResourceCounter(2, ['ml', 'sim'])
    rec.reallocate(None, 'ml', 2)
    assert rec.acquire('ml', 1)
    moved = threading.Event()
    assert rec.reallocate('ml', 'sim', 2, block=False, callback=moved.set)
    assert not moved.is_set()
    assert rec.allocated_slots('ml') == 2
    rec.release('ml', 1)
    assert moved.wait(60)
    assert rec.allocated_slots('sim') == 2


def test_reallocator_thread_gathers_then_disperses() -> None:
    rec = ResourceCounter(4, ['ml', 'sim'])
    rec.reallocate(None, 'sim', 4)
    thread = ReallocatorThread(rec, 'sim', 'ml', None, max_slots=3)
    thread.start()
    wait_until(lambda: rec.allocated_slots('ml') == 3, message='three slots allocated to ml')
    assert thread.is_alive()
    thread.stop_event.set()
    thread.join(60)
    assert not thread.is_alive()
    assert rec.unallocated_slots == 3
    assert rec.allocated_slots('sim') == 1


def test_thinker_runs_colmena_agent_hooks_in_each_thread() -> None:
    from tether.steer.thinker import BaseThinker, agent

    class Hooked(BaseThinker):
        def __init__(self, queues: PipeQueues) -> None:
            super().__init__(queues)
            self.seen: list[tuple[str | None, str]] = []

        def prepare_agent(self) -> None:
            self.local_details.payload = f'{self.agent_name}-ready'

        def tear_down_agent(self) -> None:
            self.seen.append((self.agent_name, self.local_details.payload))

        @agent
        def only(self) -> None:
            assert self.local_details.payload == 'only-ready'

    queues = PipeQueues(secret=False)
    thinker = Hooked(queues)
    thinker.run()
    assert thinker.seen == [('only', 'only-ready')]
    assert queues.role == QueueRole.CLIENT  # a Thinker takes the client side


def test_task_submitter_slots_named_by_an_attribute() -> None:
    from tether.steer.thinker import BaseThinker, task_submitter

    class Batches(BaseThinker):
        batch = 2

        def __init__(self, queues: PipeQueues) -> None:
            super().__init__(queues, ResourceCounter(2))
            self.took: list[int] = []

        @task_submitter(n_slots='batch')  # type: ignore[untyped-decorator]
        def submit(self) -> None:
            assert self.rec is not None
            self.took.append(self.rec.available_slots(None))
            self.done.set()

    thinker = Batches(PipeQueues(secret=False))
    thinker.run()
    assert thinker.took == [0]  # both slots taken at once


def count_nodes(x: int, _resources: ResourceRequirements) -> int:
    return _resources.node_count * x


def test_functions_declaring_resources_receive_them() -> None:
    request = Result.from_args_and_kwargs((2,), method='count_nodes')
    request.resources = ResourceRequirements(node_count=3)
    done = PythonMethod(count_nodes)(request)
    done.deserialize()
    assert done.success, done.failure_info
    assert done.value == 6
