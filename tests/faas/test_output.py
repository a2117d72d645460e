"""Capture of a task's stdout and stderr (issue 31 item 4), against the real service."""

from __future__ import annotations

import json
from collections.abc import Callable

import pydantic
import pytest

from tests.faas import _output_tasks as tasks
from tests.faas.conftest import AgentThread, new_user, wait_for
from tether.exceptions import TaskExecutionFailed
from tether.faas import Client, EndpointConfig, Executor
from tether.faas._server import ServiceThread
from tether.faas.endpoint._output import clip_output


def finished(client: Client, task_id: str) -> dict[str, object]:
    return wait_for(  # type: ignore[no-any-return]
        lambda: (r := client.get_task(task_id)) and not r['pending'] and r,
        60,
        f'task {task_id} to finish',
    )


def test_output_in_future_and_task_record(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    client = Client(service_url=prod_service.url, token=token)
    with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
        f = ex.submit(tasks.chatty, 1)
        assert f.result(timeout=60) == 2
        assert f.stdout == 'working on 1\n'
        assert f.stderr == 'a warning\n'
        record = finished(client, f.task_id)
        assert record['stdout'] == 'working on 1\n'
        assert record['stderr'] == 'a warning\n'
        # The next task on the same (warm) worker starts with empty streams.
        quiet = [ex.submit(tasks.quiet) for _ in range(4)]
        for q in quiet:
            assert q.result(timeout=60) == 7
            assert (q.stdout, q.stderr) == ('', '')
            assert 'stdout' not in finished(client, q.task_id)


def test_failed_task_keeps_its_output(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    client = Client(service_url=prod_service.url, token=token)
    with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
        f = ex.submit(tasks.chatty_then_fail, 'boom')
        with pytest.raises(TaskExecutionFailed, match='boom'):
            f.result(timeout=60)
        assert f.stdout == 'before the failure\n'
        assert f.stderr == 'about to fail\n'
        record = finished(client, f.task_id)
        assert record['status'] == 'failed'
        assert record['stdout'] == 'before the failure\n'
        assert 'boom' in json.dumps(record['error'])


def test_subprocess_output_and_the_cut(
    dev_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(dev_service)
    ep = start_endpoint(dev_service, user, max_output_bytes=1024)
    with Executor(ep.config.endpoint_id, service_url=dev_service.url, token=token) as ex:
        f = ex.submit(tasks.shell, 'echo from-the-shell; echo shell-error >&2')
        assert f.result(timeout=60) == 0
        assert f.stdout == 'from-the-shell\n'
        assert f.stderr == 'shell-error\n'
        big = ex.submit(tasks.lots, 100_000)
        assert big.result(timeout=60) == 100_000
        out = big.stdout
        assert out.startswith('BEGIN')
        assert out.endswith('END')
        assert f'[... {100_008 - 1024} bytes cut ...]' in out
        assert len(out) < 1024 + 100


def test_capture_off(
    dev_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(dev_service)
    ep = start_endpoint(dev_service, user, max_output_bytes=0)
    with Executor(ep.config.endpoint_id, service_url=dev_service.url, token=token) as ex:
        f = ex.submit(tasks.chatty, 5)
        assert f.result(timeout=60) == 6
        assert (f.stdout, f.stderr) == ('', '')


def test_other_user_cannot_read_the_output(
    dev_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(dev_service)
    _, other = new_user(dev_service)
    ep = start_endpoint(dev_service, user)
    with Executor(ep.config.endpoint_id, service_url=dev_service.url, token=token) as ex:
        f = ex.submit(tasks.chatty, 3)
        f.result(timeout=60)
    from tether.exceptions import FaasNotFoundError

    with pytest.raises(FaasNotFoundError):
        Client(service_url=dev_service.url, token=other).get_task(f.task_id)


def test_limit_is_bounded_in_the_config() -> None:
    common = {'name': 'x', 'endpoint_id': 'e', 'service_url': 'http://127.0.0.1:1'}
    with pytest.raises(pydantic.ValidationError, match='max_output_bytes'):
        EndpointConfig(**common, max_output_bytes=10 * 2**20)
    with pytest.raises(pydantic.ValidationError, match='max_output_bytes'):
        EndpointConfig(**common, max_output_bytes=-1)
    assert EndpointConfig(**common).max_output_bytes == 64 * 1024


def test_clip_bounds_the_escaped_text() -> None:
    assert clip_output(b'short', 100) == 'short'
    text = clip_output(b'\x01' * 10_000, 1000)  # each byte escapes to six characters
    assert len(json.dumps(text)) < 1.25 * 1000 + 50
    assert 'bytes cut' in text
    text = clip_output('\u00e9'.encode() * 10_000, 1000)
    assert len(json.dumps(text)) < 1.25 * 1000 + 50
    assert text.startswith('\u00e9')
    assert text.endswith('\u00e9')
    # Invalid UTF-8 is replaced, never an error.
    assert clip_output(b'\xff\xfeok', 100).endswith('ok')


def test_parsl_engine_app_captures_and_keeps_output_past_the_time_limit() -> None:
    """The Parsl engine's app (run in a worker's main thread, as Parsl's workers do)."""
    from tether.faas._payload import pack_args, pack_function
    from tether.faas.endpoint._worker import run_parsl_task

    def message(fn: Callable[..., object], *args: object) -> tuple[object, ...]:
        body = pack_function(fn)
        return ('t1', fn.__qualname__, 'pickle', body, 'tether', pack_args(args, {}), None, None)

    result = run_parsl_task(message(tasks.chatty, 1))  # type: ignore[arg-type]
    assert result[1] == 'success'
    assert result[7] == {'stdout': 'working on 1\n', 'stderr': 'a warning\n'}
    result = run_parsl_task(message(tasks.print_then_block), timeout=0.5)  # type: ignore[arg-type]
    assert result[1] == 'failed'
    assert result[4] is not None
    assert result[4]['type'] == 'TaskTimeoutError'
    assert result[7] == {'stdout': 'started, then stuck\n'}
