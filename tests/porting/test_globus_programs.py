"""Six typical Globus Compute programs, written the way its documentation's examples go,
run against a real tether faas service and endpoint with only their imports changed
(issue 29).

Each ``program_*`` function is the user's program: its body is what a Globus Compute
user writes, the endpoint id the one they would paste in. The service URL and token come
from the environment (``TETHER_FAAS_URL``, ``TETHER_FAAS_TOKEN``), as Globus Compute's
come from the user's login, so the programs name neither. The imports below are the only
lines changed from the Globus Compute originals (in comments).
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.faas.conftest import AgentThread, new_endpoint, new_user

# from globus_compute_sdk import Client, Executor, ShellFunction
# from globus_compute_sdk.errors import TaskExecutionFailed, TaskPending
from tether.exceptions import TaskExecutionFailed, TaskPending
from tether.faas import Client, EndpointConfig, Executor, ServiceConfig, ShellFunction
from tether.faas._server import ServiceThread

# --- the user's functions ------------------------------------------------------------


def double(x):  # type: ignore[no-untyped-def]
    return x * 2


def platform_info():  # type: ignore[no-untyped-def]
    import platform

    return platform.platform()


def divide(a, b):  # type: ignore[no-untyped-def]
    return a / b


# --- the user's programs -------------------------------------------------------------


def program_submit(endpoint_id: str) -> Any:
    with Executor(endpoint_id=endpoint_id) as gce:
        future = gce.submit(double, 21)
        return future.result()


def program_map(endpoint_id: str) -> list[Any]:
    with Executor(endpoint_id=endpoint_id) as gce:
        return list(gce.map(double, range(5)))


def program_register_and_run(endpoint_id: str) -> Any:
    gcc = Client()
    func_id = gcc.register_function(platform_info)
    task_id = gcc.run(endpoint_id=endpoint_id, function_id=func_id)
    while True:  # the docs' loop: ask until the task is done
        try:
            return gcc.get_result(task_id)
        except TaskPending:
            time.sleep(0.05)


def program_batch(endpoint_id: str) -> list[Any]:
    gcc = Client()
    func_id = gcc.register_function(double)
    batch = gcc.create_batch()
    for x in range(4):
        batch.add(func_id, args=(x,))
    batch_res = gcc.batch_run(endpoint_id, batch)
    task_ids = batch_res['tasks'][func_id]
    while True:
        results = gcc.get_batch_result(task_ids)
        if all(not r['pending'] for r in results.values()):
            return [results[t]['result'] for t in task_ids]
        time.sleep(0.05)


def program_shell(endpoint_id: str) -> Any:
    bf = ShellFunction('echo "{message}" && uname -s', walltime=60)
    with Executor(endpoint_id=endpoint_id) as gce:
        future = gce.submit(bf, message='hello from the endpoint')
        return future.result()


def program_error(endpoint_id: str) -> str:
    with Executor(endpoint_id=endpoint_id) as gce:
        future = gce.submit(divide, 1, 0)
        try:
            future.result()
        except TaskExecutionFailed as e:
            return str(e)
    return 'no error'


# --- one service and one endpoint for the module --------------------------------------


@pytest.fixture(scope='module')
def endpoint_id() -> Iterator[str]:
    st = ServiceThread(ServiceConfig(port=0, database='sqlite://', broker='memory://')).start()
    user, token = new_user(st)
    eid, ep_token = new_endpoint(st, user)
    config = EndpointConfig(
        name='ep', endpoint_id=eid, service_url=st.url, heartbeat_s=0.5, max_workers=2
    )
    agent = AgentThread(config, ep_token).start()
    saved = {k: os.environ.get(k) for k in ('TETHER_FAAS_URL', 'TETHER_FAAS_TOKEN')}
    os.environ.update(TETHER_FAAS_URL=st.url, TETHER_FAAS_TOKEN=token)
    try:
        yield eid
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        agent.stop()
        st.stop()


def test_submit_and_result(endpoint_id: str) -> None:
    assert program_submit(endpoint_id) == 42


def test_map_over_a_list(endpoint_id: str) -> None:
    assert program_map(endpoint_id) == [0, 2, 4, 6, 8]


def test_register_function_then_run_by_id(endpoint_id: str) -> None:
    assert program_register_and_run(endpoint_id) == platform.platform()


def test_batch(endpoint_id: str) -> None:
    assert program_batch(endpoint_id) == [0, 2, 4, 6]


def test_shell_function(endpoint_id: str) -> None:
    result = program_shell(endpoint_id)
    assert result.returncode == 0
    assert result.stdout.splitlines() == ['hello from the endpoint', platform.system()]


def test_error_raised_on_the_endpoint_comes_back(endpoint_id: str) -> None:
    message = program_error(endpoint_id)
    assert 'ZeroDivisionError' in message
    assert 'division by zero' in message
