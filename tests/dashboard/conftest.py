"""Real servers for the dashboard's tests: a function service with two users and their
endpoints, a node server with metrics, result files; dashboards in threads."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faas import _output_tasks as tasks
from tests.faas.conftest import AgentThread, new_endpoint, new_user, wait_for
from tests.node.conftest import RunningNode
from tether._serve.metrics import MetricsOptions
from tether._serve.spawn import verify_server
from tether.dashboard import DashboardConfig, MetricsTarget, append_steer_record, build_app
from tether.faas import EndpointConfig, Executor, ServiceConfig
from tether.faas._server import ServiceThread


class DashboardThread:
    """A dashboard served by uvicorn in a thread, on a free loopback port."""

    def __init__(self, config: DashboardConfig) -> None:
        import uvicorn

        self.app = build_app(config)
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(64)
        self.url = f'http://127.0.0.1:{self.sock.getsockname()[1]}'
        self.server = uvicorn.Server(
            uvicorn.Config(self.app, log_level='warning', lifespan='on', access_log=False)
        )
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True
        )
        self.thread.start()
        wait_for(lambda: self.server.started, 30, 'the dashboard to start')

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


@dataclasses.dataclass
class Stack:
    service: ServiceThread
    token_a: str
    token_b: str
    agent_a: AgentThread
    node: RunningNode
    node_metrics: str
    agent_metrics: str
    tasks_a: dict[str, str]
    task_b: str
    steer_dir: Path
    bench_dir: Path

    def dashboard(self, token: str, **options: Any) -> DashboardThread:
        config = DashboardConfig(
            port=0,
            key='test-key',
            faas_url=self.service.url,
            faas_token=token,
            metrics=[
                MetricsTarget(url=self.node_metrics, name='node-a'),
                MetricsTarget(url=self.agent_metrics, name='faas-endpoint-a'),
            ],
            steer_dirs=[str(self.steer_dir)],
            bench_dirs=[str(self.bench_dir)],
            refresh_s=0.5,
            page_refresh_s=0,  # the test reloads pages itself
            **options,
        )
        return DashboardThread(config)


def _agent(st: ServiceThread, user_id: str, name: str, **options: Any) -> AgentThread:
    endpoint_id, token = new_endpoint(st, user_id, name)
    config = EndpointConfig(
        name=name,
        endpoint_id=endpoint_id,
        service_url=st.url,
        heartbeat_s=0.5,
        max_workers=1,
        **options,
    )
    return AgentThread(config, token).start()


def _steer_files(folder: Path) -> None:
    from tether.steer.models import Result

    now = time.time() - 60
    for i in range(12):
        topic = 'simulate' if i % 3 else 'train'
        r = Result(inputs=((i,), {}), method=topic, topic=topic)
        r.resources.node_count = 2 if topic == 'train' else 1
        r.timestamp.created = now + i * 2
        r.timestamp.compute_started = now + i * 2 + 0.5
        r.timestamp.compute_ended = now + i * 2 + 4 + (i % 4)
        r.timestamp.result_received = r.timestamp.compute_ended + 0.2
        r.success = i != 7
        append_steer_record(folder / f'{topic}-results.jsonl', r)


def _bench_run(folder: Path) -> None:
    run = folder / 'synthetic_thread-pool_2026-11-29-12-00-00'
    run.mkdir(parents=True)
    start = time.time() - 30
    with open(run / 'tasks.jsonl', 'w') as f:
        for i in range(20):
            t0 = start + i * 0.1
            record = {
                'task_id': f't{i}',
                'function_name': 'sleep',
                'submit_time': t0,
                'received_time': t0 + 0.05 + 0.01 * (i % 5),
                'success': True,
                'execution': {'execution_start_time': t0 + 0.01, 'execution_end_time': t0 + 0.04},
            }
            f.write(json.dumps(record) + '\n')
    summary = {
        'app': 'synthetic',
        'executor': 'thread-pool',
        'workers': 2,
        'transformer': None,
        'start_time': start,
        'end_time': start + 2.5,
        'makespan': 2.5,
        'tasks': {'completed': 20, 'failed': 0},
        'success': True,
        'error': None,
    }
    (run / 'summary.json').write_text(json.dumps(summary))


@pytest.fixture(scope='module')
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp('dashboard')
    st = ServiceThread(ServiceConfig(port=0, database='sqlite://', broker='memory://')).start()
    agents: list[AgentThread] = []
    node = RunningNode(tmp, '--metrics-port', '0')
    try:
        user_a, token_a = new_user(st)
        user_b, token_b = new_user(st)
        agent_a = _agent(st, user_a, 'site-a', metrics=MetricsOptions(port=0))
        agent_b = _agent(st, user_b, 'site-b')
        agents += [agent_a, agent_b]
        ids: dict[str, str] = {}
        with Executor(agent_a.config.endpoint_id, service_url=st.url, token=token_a) as ex:
            chatty = ex.submit(tasks.chatty, 41)
            failing = ex.submit(tasks.chatty_then_fail, 'boom from user A')
            quiet = ex.submit(tasks.quiet)
            assert chatty.result(timeout=60) == 42
            with contextlib.suppress(Exception):
                failing.result(timeout=60)
            assert quiet.result(timeout=60) == 7
            ids = {'chatty': chatty.task_id, 'failing': failing.task_id, 'quiet': quiet.task_id}
        with Executor(agent_b.config.endpoint_id, service_url=st.url, token=token_b) as ex:
            task_b = ex.submit(tasks.chatty, 1)
            assert task_b.result(timeout=60) == 2
        c = node.connector()
        try:
            for _ in range(5):
                c.get(c.put(os.urandom(2000)))
        finally:
            c.close()
        info = verify_server(node.state, node.secret)
        assert info is not None
        assert info.metrics is not None
        agent_address = agent_a.agent.metrics.address()
        assert agent_address is not None
        steer_dir = tmp / 'campaign'
        steer_dir.mkdir()
        _steer_files(steer_dir)
        bench_dir = tmp / 'runs'
        _bench_run(bench_dir)
        yield Stack(
            st,
            token_a,
            token_b,
            agent_a,
            node,
            'http://{}:{}/metrics'.format(*info.metrics),
            'http://{}:{}/metrics'.format(*agent_address),
            ids,
            task_b.task_id,
            steer_dir,
            bench_dir,
        )
    finally:
        for agent in agents:
            agent.stop()
        node.stop()
        st.stop()
