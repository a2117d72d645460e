"""The service over PostgreSQL and RabbitMQ, with real endpoints: runs, isolation, limits."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable

import pytest

from tests.faas import _tasks
from tests.faas.conftest import AgentThread, new_endpoint, new_user, result_of, wait_for
from tether._clock import SYSTEM_CLOCK
from tether.exceptions import (
    FaasAuthenticationError,
    FaasNotFoundError,
    FaasPayloadTooLargeError,
    FunctionNotAllowedError,
    TaskExecutionFailed,
    TaskPending,
)
from tether.faas import Client, EndpointConfig, Executor, _frames
from tether.faas._server import ServiceThread
from tether.testing import FakeClock


def test_function_registered_once_runs_on_two_endpoints(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    a = start_endpoint(prod_service, user, name='laptop')
    b = start_endpoint(prod_service, user, name='cluster')
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.square)
        assert str(uuid.UUID(fid)) == fid
        ta = client.run(fid, a.config.endpoint_id, 3)  # the funcX paper's listing
        tb = client.run(4, endpoint_id=b.config.endpoint_id, function_id=fid)  # today's SDK
        assert result_of(client, ta) == 9
        assert result_of(client, tb) == 16
        assert client.get_task(ta)['endpoint_id'] == a.config.endpoint_id
        assert client.get_task(tb)['endpoint_id'] == b.config.endpoint_id
        statuses = {e['name']: e for e in client.list_endpoints()}
        assert statuses['laptop']['online']
        assert statuses['cluster']['online']


def test_get_result_raises_pending_then_returns(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.sleep_then)
        tid = client.run(fid, ep.config.endpoint_id, 1.0, value={'data': 1})
        with pytest.raises(TaskPending) as info:
            client.get_result(tid)
        assert info.value.task_id == tid
        assert info.value.status in ('waiting-for-ep', 'running')
        assert result_of(client, tid) == {'data': 1}
        # Taken once: the result is deleted after the client acknowledged it.
        with pytest.raises(FaasNotFoundError, match='acknowledged'):
            client.get_result(tid)
        assert client.get_task(tid)['status'] == 'success'


def test_batch_run_and_batch_results(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.add)
        batch = client.create_batch()
        for i in range(20):
            batch.add(i, b=100, endpoint_id=ep.config.endpoint_id, function_id=fid)
        ids = client.batch_run(batch)
        wait_for(
            lambda: all(not t['pending'] for t in map(client.get_task, ids)), what='the batch'
        )
        results = client.get_batch_result(ids)
        assert [results[t]['result'] for t in ids] == [i + 100 for i in range(20)]


def test_executor_futures_map_errors_and_timings(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
        assert list(ex.map(_tasks.square, range(50))) == [i * i for i in range(50)]
        future = ex.submit(_tasks.fail, 'boom')
        with pytest.raises(TaskExecutionFailed, match='ValueError: boom') as info:
            future.result(timeout=60)
        assert info.value.remote_type == 'ValueError'
        assert 'in fail' in info.value.remote_traceback
        f = ex.submit(_tasks.add, 1, b=2)
        assert f.result(timeout=60) == 3
        t = f.timings
        order = [
            'client_submit',
            'service_received',
            'service_queued',
            'service_dispatched',
            'endpoint_received',
            'worker_start',
            'worker_end',
            'endpoint_sent',
            'service_result',
            'service_published',
            'service_sent',
            'client_received',
        ]
        assert [t[k] for k in order] == sorted(t[k] for k in order)


def test_json_data_mode(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    client = Client(prod_service.url, token, data_serializer='json')
    assert client.function_serializer == 'source'
    with Executor(ep.config.endpoint_id, client=client) as ex:
        assert ex.submit(_tasks.add, 2, b=3).result(timeout=60) == 5
        # JSON carries no Python objects: a tuple comes back as a list.
        assert ex.submit(_tasks.echo, (1, 'a')).result(timeout=60) == [1, 'a']
    client.close()


def test_wrong_token_is_refused(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    with Client(prod_service.url, 'tfu_not-a-token') as client:
        with pytest.raises(FaasAuthenticationError, match='401'):
            client.register_function(_tasks.square)
        with pytest.raises(FaasAuthenticationError):
            client.list_endpoints()
    user, _ = new_user(prod_service)
    eid, _ = new_endpoint(prod_service, user)
    from tether.faas import EndpointConfig

    config = EndpointConfig(name='x', endpoint_id=eid, service_url=prod_service.url)
    agent = AgentThread(config, 'tfe_wrong').start(wait=False)
    agent._thread.join(60)
    assert isinstance(agent.agent.fatal, FaasAuthenticationError)


def test_other_users_tasks_and_endpoints_are_invisible(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    alice, alice_token = new_user(prod_service)
    _bob, bob_token = new_user(prod_service)
    ep = start_endpoint(prod_service, alice)
    with Client(prod_service.url, alice_token) as a, Client(prod_service.url, bob_token) as b:
        fid = a.register_function(_tasks.square)
        tid = a.run(fid, ep.config.endpoint_id, 5)
        result_of_bob = [lambda: b.get_result(tid), lambda: b.get_task(tid)]
        for call in result_of_bob:
            with pytest.raises(FaasNotFoundError):
                call()
        with pytest.raises(FaasNotFoundError):
            b.get_endpoint_status(ep.config.endpoint_id)
        assert b.list_endpoints() == []
        # Bob cannot run on Alice's endpoint, nor run Alice's function.
        bob_fid = b.register_function(_tasks.square)
        with pytest.raises(FaasNotFoundError, match='endpoint'):
            b.run(bob_fid, ep.config.endpoint_id, 1)
        with pytest.raises(FaasNotFoundError, match='function'):
            b.run(fid, ep.config.endpoint_id, 1)
        with pytest.raises(FaasNotFoundError):
            b.task_group_tasks(a.task_group_id)
        assert result_of(a, tid) == 25
        # Nor read Alice's result stream.
        ex = Executor(ep.config.endpoint_id, client=b, task_group_id=a.task_group_id)
        with pytest.raises(FaasNotFoundError):
            ex.reload_tasks()


def test_oversized_payload_points_to_proxies(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    limit = prod_service.config.max_payload_bytes
    with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
        with pytest.raises(FaasPayloadTooLargeError, match='by reference'):
            ex.submit(_tasks.nbytes, b'x' * (limit + 1))
        # The service checks too, whatever the client does.
        client = ex.client
        fid = client.function_id_for(_tasks.nbytes)
        task = {
            'task_id': str(uuid.uuid4()),
            'function_id': fid,
            'endpoint_id': ep.config.endpoint_id,
        }
        frame = _frames.encode(
            _frames.SUBMIT, {'task_group_id': None, 'tasks': [task]}, [b'x' * (limit + 1)]
        )
        response = client._http.post('/v1/submit', content=frame)
        assert response.status_code == 413
        assert 'proxy' in response.json()['message']
        assert ex.submit(_tasks.nbytes, b'x' * 1000).result(timeout=60) == 1000


def test_allowlist_refuses_unlisted_functions(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    with Client(prod_service.url, token) as client:
        allowed = client.register_function(_tasks.square)
        other = client.register_function(_tasks.add)
        ep = start_endpoint(prod_service, user, allowed_functions=[allowed])
        assert result_of(client, client.run(allowed, ep.config.endpoint_id, 6)) == 36
        with pytest.raises(FunctionNotAllowedError):
            client.run(other, ep.config.endpoint_id, 1)
        # The endpoint enforces it too (a task queued before the endpoint reported its
        # allowlist, or by a service that does not check).
        assert prod_service.service is not None
        refusal = ep.agent._refuse(_frames.decode_task({'task_id': 't', 'function_id': other}))
        assert refusal is not None
        assert refusal['type'] == 'FunctionNotAllowedError'


def test_unacknowledged_results_are_delivered_again(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    client = Client(prod_service.url, token)
    fid = client.register_function(_tasks.square)
    batch = client.create_batch()
    for i in range(5):
        batch.add(i, endpoint_id=ep.config.endpoint_id, function_id=fid)
    group = client.create_task_group()
    ids = client.batch_run(batch, task_group_id=group)
    wait_for(lambda: all(not client.get_task(t)['pending'] for t in ids), what='results')

    async def read_without_ack() -> set[str]:
        from websockets.asyncio.client import connect

        url = prod_service.url.replace('http://', 'ws://') + f'/v1/task_groups/{group}/results'
        seen: set[str] = set()
        async with connect(url, additional_headers={'Authorization': f'Bearer {token}'}) as ws:
            while len(seen) < len(ids):
                frame = _frames.decode(await asyncio.wait_for(ws.recv(), 30))
                seen.update(h['task_id'] for h in frame.header['results'])
        return seen  # closed without acknowledging anything

    assert asyncio.run(read_without_ack()) == set(ids)
    # A new client reattaches to the task group: every result comes again.
    with Executor(ep.config.endpoint_id, client=client, task_group_id=group) as ex:
        futures = ex.reload_tasks()
        assert sorted(f.task_id for f in futures) == sorted(ids)
        assert sorted(f.result(timeout=60) for f in futures) == [0, 1, 4, 9, 16]
    # Now acknowledged, and stored before the Executor's shutdown returned: nothing is left
    # to reattach to, at once.
    assert all(t['acknowledged'] for t in client.task_group_tasks(group))
    with Executor(ep.config.endpoint_id, client=client, task_group_id=group) as ex:
        assert ex.reload_tasks() == []
    client.close()


def test_openapi_describes_every_route(prod_service: ServiceThread) -> None:
    import httpx

    from tether.faas._app import build_app

    doc = httpx.get(prod_service.url + '/openapi.json').json()
    assert doc['openapi'].startswith('3.')
    assert prod_service.service is not None
    app = build_app(prod_service.service)
    described = {(m.upper(), p) for p, ops in doc['paths'].items() for m in ops}
    for route in app.routes:
        methods = getattr(route, 'methods', None)
        if not methods or route.path in ('/', '/openapi.json'):  # type: ignore[attr-defined]
            continue
        for method in methods - {'HEAD'}:
            assert (method, route.path) in described, (method, route.path)  # type: ignore[attr-defined]
    assert json.dumps(doc)


def test_an_endpoint_is_connected_once_its_allowlist_is_stored(
    prod_service: ServiceThread,
) -> None:
    """The agent reports itself connected only once the service stored its HELLO: a
    submission from then on is checked against its allowlist, even when the service had
    cached the endpoint's info (without the allowlist) just before it connected."""
    st = prod_service
    assert st.service is not None
    st.service.repo.clock = FakeClock()  # cached info never expires by itself
    user, token = new_user(st)
    eid, ep_token = new_endpoint(st, user)
    with Client(st.url, token) as client:
        allowed = client.register_function(_tasks.square)
        other = client.register_function(_tasks.add)
        client.run(1, 2, endpoint_id=eid, function_id=other)  # caches: no allowlist yet
        config = EndpointConfig(
            name='ep',
            endpoint_id=eid,
            service_url=st.url,
            max_workers=1,
            allowed_functions=[allowed],
        )
        agent = AgentThread(config, ep_token).start()
        try:
            with pytest.raises(FunctionNotAllowedError):
                client.run(1, 2, endpoint_id=eid, function_id=other)
        finally:
            agent.stop()
            st.service.repo.clock = SYSTEM_CLOCK
