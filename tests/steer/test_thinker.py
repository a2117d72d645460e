"""The Thinker: agents, result processors, task submitters, event responders."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from tests.steer import _tasks
from tether.exceptions import ConfigError
from tether.steer import (
    BaseThinker,
    LocalTaskServer,
    PipeQueues,
    ResourceCounter,
    Result,
    agent,
    event_responder,
    result_processor,
    task_submitter,
)
from tether.testing.steer import serving


class Batch(BaseThinker):
    """Submit N additions while slots allow; stop after N results."""

    def __init__(self, queues: Any, n: int) -> None:
        super().__init__(queues, ResourceCounter(2, ['add']))
        self.n = n
        self.sent = 0
        self.results: list[Result] = []
        self.started = False

    @agent(startup=True)
    def startup(self) -> None:
        self.started = True
        self.rec.reallocate(None, 'add', 2)

    @task_submitter(task_type='add', n_slots=1)
    def submit(self) -> None:
        if self.sent < self.n:
            self.queues.send_inputs(self.sent, 100, method='add', topic='default')
            self.sent += 1
        else:
            self.rec.release('add', 1)
            self.done.wait()

    @result_processor(topic='default')
    def collect(self, result: Result) -> None:
        self.results.append(result)
        self.rec.release('add', 1)
        if len(self.results) == self.n:
            self.done.set()


def test_agents_run_concurrently_and_stop_when_done(caplog: pytest.LogCaptureFixture) -> None:
    queues = PipeQueues()
    thinker = Batch(queues, 6)
    with caplog.at_level(logging.INFO), serving(LocalTaskServer(queues, [_tasks.add], 2)):
        thinker.run()
    assert thinker.started
    assert sorted(r.value for r in thinker.results) == [100 + i for i in range(6)]
    assert thinker.rec.available_slots('add') == 2
    # Each agent logs under its own name.
    names = {r.name for r in caplog.records}
    assert any(n.endswith('Batch.collect') for n in names)
    assert any(n.endswith('Batch.submit') for n in names)


class Coordinated(BaseThinker):
    """Simulations fill the slots; after 3 results an event moves slots to training."""

    def __init__(self, queues: Any) -> None:
        super().__init__(queues, ResourceCounter(2, ['sim', 'train']))
        self.retrain = threading.Event()
        self.sim_done = 0
        self.train_slots_seen: list[int] = []
        self.sims_running_at_train: list[int] = []

    @agent(startup=True)
    def allocate(self) -> None:
        self.rec.reallocate(None, 'sim', 2)

    @task_submitter(task_type='sim')
    def simulate(self) -> None:
        self.queues.send_inputs(1, 1, method='add', topic='sim')

    @result_processor(topic='sim')
    def record(self, result: Result) -> None:
        self.rec.release('sim', 1)
        self.sim_done += 1
        if self.sim_done == 3:
            self.retrain.set()

    @event_responder(
        event_name='retrain',
        reallocate_resources=True,
        gather_from='sim',
        gather_to='train',
        disperse_to='sim',
        max_slots=2,
    )
    def train(self) -> None:
        # Wait until the gatherer has taken both slots from the simulations.
        assert self.rec.acquire('train', 2, timeout=60)
        self.train_slots_seen.append(self.rec.allocated_slots('train'))
        self.sims_running_at_train.append(self.rec.active_slots('sim'))
        self.rec.release('train', 2)

    @agent
    def watch(self) -> None:
        # Ends the campaign once training ran and its slots went back to simulation.
        while not self.done.is_set():
            if self.train_slots_seen and self.rec.allocated_slots('sim') == 2:
                return
            self.done.wait(0.05)


def test_event_responder_reallocates_slots() -> None:
    queues = PipeQueues(topics=['sim'])
    thinker = Coordinated(queues)
    with serving(LocalTaskServer(queues, [_tasks.add], 2)):
        thinker.run()
    assert thinker.train_slots_seen == [2]
    assert thinker.sims_running_at_train == [0]
    assert thinker.rec.allocated_slots('train') == 0
    assert thinker.rec.allocated_slots('sim') == 2


class Broken(BaseThinker):
    @agent
    def crash(self) -> None:
        raise RuntimeError('policy bug')

    @agent
    def wait(self) -> None:
        self.done.wait()


def test_an_agent_error_stops_the_thinker_and_is_raised() -> None:
    thinker = Broken(PipeQueues())
    with pytest.raises(RuntimeError, match='policy bug'):
        thinker.run()
    # As a thread, the error is kept instead.
    thinker = Broken(PipeQueues())
    thinker.start()
    thinker.join(60)
    assert not thinker.is_alive()
    assert isinstance(thinker.error, RuntimeError)


def test_stop_and_kill_signal_end_the_agents() -> None:
    queues = PipeQueues()

    class Waits(BaseThinker):
        @result_processor
        def results(self, result: Result) -> None:
            pass

    thinker = Waits(queues)
    thinker.start()
    thinker.stop()
    thinker.join(60)
    assert not thinker.is_alive()
    # The task server's kill signal reaches result processors.
    thinker = Waits(queues)
    server = LocalTaskServer(queues, [_tasks.add], 1)
    with serving(server):
        thinker.start()
        queues.send_kill_signal()
        thinker.join(60)
    assert not thinker.is_alive()
    assert thinker.error is None


def test_misuse_is_a_clear_error() -> None:
    class NoRec(BaseThinker):
        @task_submitter(task_type='x')
        def submit(self) -> None:
            pass

    with pytest.raises(ConfigError, match='ResourceCounter'):
        NoRec(PipeQueues()).run()

    class NoAgents(BaseThinker):
        pass

    with pytest.raises(ConfigError, match='no agents'):
        NoAgents(PipeQueues()).run()

    class NoEvent(BaseThinker):
        @event_responder(event_name='missing')
        def respond(self) -> None:
            pass

    with pytest.raises(ConfigError, match=r'threading\.Event'):
        NoEvent(PipeQueues()).run()
