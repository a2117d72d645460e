"""The Globus Compute SDK's calls against a real service and endpoint (issue 29).

Each test runs over the production service (PostgreSQL + RabbitMQ) and a real endpoint
with worker processes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from tests.faas import _tasks
from tests.faas.conftest import AgentThread, new_user, wait_for
from tether.exceptions import ConfigError, FaasNotFoundError, WalltimeError
from tether.faas import (
    Client,
    ComputeFuture,
    ComputeSerializer,
    DillCodeSource,
    Executor,
    JSONData,
    MPIFunction,
    ShellFunction,
    ShellResult,
    TaskFuture,
)
from tether.faas._server import ServiceThread

pytestmark = pytest.mark.timeout(180)


def _done(client: Client, ids: list[str]) -> bool:
    return all(not client.get_task(t)['pending'] for t in ids)


def test_register_function_and_executor_submit_agree_on_the_id(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.square)
        with Executor(ep.config.endpoint_id, client=client) as ex:
            assert ex.submit(_tasks.square, 3).result(timeout=60) == 9
            assert ex.register_function(_tasks.add) == client.register_function(_tasks.add)
        with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
            assert ex.register_function(_tasks.square) == fid
            with pytest.raises(ValueError, match='registered with this executor already'):
                ex.register_function(_tasks.square)


def test_executor_without_endpoint_until_set(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread], faas_home: object
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    with Executor(service_url=prod_service.url, token=token) as ex:
        assert ex.endpoint_id is None
        with pytest.raises(ConfigError, match='no endpoint'):
            ex.submit(_tasks.square, 2)
        ex.endpoint_id = uuid.UUID(ep.config.endpoint_id)
        assert ex.endpoint_id == ep.config.endpoint_id
        future = ex.submit(_tasks.square, 4)
        assert isinstance(future, ComputeFuture)
        assert ComputeFuture is TaskFuture
        assert future.result(timeout=60) == 16


def test_executor_options_are_validated_and_kept(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    spec = {'num_nodes': 1, 'ranks_per_node': 2}
    with Executor(
        ep.config.endpoint_id,
        service_url=prod_service.url,
        token=token,
        resource_specification=spec,
        user_endpoint_config={'worker_init': 'true'},
        serializer=ComputeSerializer(strategy_code=DillCodeSource(), strategy_data=JSONData()),
        label='mine',
    ) as ex:
        assert ex.resource_specification == spec
        assert ex.user_endpoint_config == {'worker_init': 'true'}
        assert ex.serializer.data_serializer_id == 'json'
        assert 'mine' in repr(ex)
        with pytest.raises(TypeError, match='resource_specification'):
            ex.resource_specification = 'nodes=2'  # type: ignore[assignment]
        with pytest.raises(TypeError, match='ComputeSerializer'):
            ex.serializer = 'json'

        def triple(x):  # type: ignore[no-untyped-def]
            return 3 * x

        # JSON data, source functions: a tuple comes back as a list.
        assert ex.submit(triple, (1,)).result(timeout=60) == [1, 1, 1]


def test_shell_and_mpi_functions_run_on_the_workers(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread], tmp_path: object
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    with Executor(ep.config.endpoint_id, service_url=prod_service.url, token=token) as ex:
        echo = ShellFunction('echo {word}; echo oops >&2; exit {code}')
        ok = ex.submit(echo, word='hello', code=0).result(timeout=60)
        assert isinstance(ok, ShellResult)
        assert (ok.returncode, ok.stdout, ok.stderr) == (0, 'hello', 'oops')
        assert ok.cmd == 'echo hello; echo oops >&2; exit 0'
        bad = ex.submit(echo, word='x', code=3).result(timeout=60)
        assert bad.returncode == 3
        assert 'exit code: 3' in str(bad)
        slow = ShellFunction('sleep 30', walltime=0.2)
        late = ex.submit(slow).result(timeout=60)
        assert late.returncode == 124
        assert late.exception_name == 'subprocess.TimeoutExpired'
        pid = ex.submit(ShellFunction('echo $$')).result(timeout=60)
        assert int(pid.stdout) > 0
        mpi = MPIFunction('echo ranks', name='lammps')
        assert mpi.__name__ == 'lammps'
        got = ex.submit(mpi).result(timeout=60)
        assert got.cmd == '$PARSL_MPI_PREFIX echo ranks'
        assert got.stdout == 'ranks'


def test_shell_function_snippets_and_files(tmp_path: object) -> None:
    import pathlib

    out = pathlib.Path(str(tmp_path)) / 'out.txt'
    fn = ShellFunction('seq 1 50', stdout=out, snippet_lines=3)
    result = fn()
    assert isinstance(result, ShellResult)
    assert result.stdout == '48\n49\n50'
    assert out.read_text().splitlines()[0] == '1'
    again = fn()
    assert isinstance(again, ShellResult)
    assert again.stdout == '48\n49\n50'  # appended, the snippet is this call's
    assert len(out.read_text().splitlines()) == 100
    with pytest.raises(TypeError, match='cmd must be a string'):
        ShellFunction(['ls'])  # type: ignore[arg-type]
    with pytest.raises(WalltimeError, match='walltime must be a number of seconds >= 0'):
        ShellFunction('ls', walltime=-1)


def test_batch_in_both_shapes(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user)
    eid = ep.config.endpoint_id
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.add)
        group = client.create_task_group()
        batch = client.create_batch(task_group_id=group)
        batch.add(fid, (1,), {'b': 2})
        batch.add(fid, args=(5,))
        batch.add(function_id=fid, kwargs={'a': 7})
        answer = client.batch_run(eid, batch)
        assert answer['task_group_id'] == group
        assert answer['endpoint_id'] == eid
        ids = answer['tasks'][fid]
        assert len(ids) == 3
        wait_for(lambda: _done(client, ids), what='the batch')
        results = client.get_batch_result(ids)
        assert [results[t]['result'] for t in ids] == [3, 5, 7]
        assert {t['task_id'] for t in client.task_group_tasks(group)} == set(ids)
        old = client.create_batch()
        old.add(1, endpoint_id=eid, function_id=fid, b=1)
        old.add(fid, eid, 2)
        assert len(client.batch_run(old)) == 2
        with pytest.raises(TypeError, match='args: expected `tuple`, got str'):
            batch.add(fid, 'asdf')
        with pytest.raises(TypeError, match='kwargs: expected dict'):
            batch.add(fid, kwargs=3)
        with pytest.raises(ValueError, match='function_id must be a UUID'):
            batch.add('not-a-uuid')
        with pytest.raises(ValueError, match='task_group_id must be a UUID'):
            batch.task_group_id = 'a'
        no_endpoint = client.create_batch()
        no_endpoint.add(fid, (1,))
        with pytest.raises(TypeError, match='name no endpoint'):
            client.batch_run(no_endpoint)


def test_client_function_and_endpoint_calls(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    ep = start_endpoint(prod_service, user, allowed_functions=None)
    eid = ep.config.endpoint_id
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.square)
        info = client.get_function(fid)
        assert info['function_id'] == fid
        assert info['function_name'] == 'square'
        status = client.get_endpoint_status(eid)
        assert status['status'] == 'online'
        assert status['online'] is True
        meta = client.get_endpoint_metadata(eid)
        assert meta['endpoint_id'] == eid
        assert meta['max_workers'] == 2
        assert [e['uuid'] for e in client.get_endpoints()] == [eid]
        with pytest.raises(ValueError, match='role'):
            client.get_endpoints(role='admin')
        assert client.get_allowed_functions(eid) == {'endpoint_id': eid, 'functions': None}
        client.delete_function(fid)
        with pytest.raises(FaasNotFoundError):
            client.get_function(fid)
        with pytest.raises(FaasNotFoundError):
            client.delete_function(fid)
        client.stop_endpoint(eid)
        wait_for(lambda: not ep.agent.connected.is_set(), what='the endpoint to stop')
        ep._thread.join(60)
        assert not ep._thread.is_alive()
        wait_for(lambda: client.get_endpoint_status(eid)['status'] == 'offline', what='offline')
        with pytest.raises(FaasNotFoundError):
            client.stop_endpoint(str(uuid.uuid4()))


def test_allowed_functions_of_an_endpoint_with_an_allowlist(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> None:
    user, token = new_user(prod_service)
    with Client(prod_service.url, token) as client:
        fid = client.register_function(_tasks.square)
        ep = start_endpoint(prod_service, user, allowed_functions=[fid])
        got = client.get_allowed_functions(ep.config.endpoint_id)
        assert got['functions'] == [fid]
