"""Per-function Python environments: a second virtual environment with a package the
default one lacks, a command template, interpreters named by path, and functions refused
before they run when their environment cannot read them (another Python, an older
tether, an unknown name, a missing interpreter)."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys
import sysconfig
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.faas.conftest import AgentThread, new_user, result_of, wait_for
from tether.exceptions import ConfigError, TaskExecutionFailed
from tether.faas import Client, EndpointConfig, Executor
from tether.faas._functions_env import check_readable, open_envelope
from tether.faas._server import ServiceThread
from tether.faas._version import VersionMismatch
from tether.faas.endpoint._environments import MAX_ENVIRONMENTS, Environments, probe
from tether.faas.endpoint._pool import ProcessPoolEngine
from tether.faas.endpoint.engine import make_task, task_value

PACKAGE = 'tether_envtest_pkg'


def uses_package() -> tuple[str, str]:
    """Needs the package only the second environment has."""
    import tether_envtest_pkg  # type: ignore[import-not-found]

    return str(tether_envtest_pkg.VALUE), sys.executable


def where_am_i() -> tuple[str, str | None]:
    return sys.executable, os.environ.get('TETHER_ENVTEST_MARK')


def touch(path: str) -> str:
    pathlib.Path(path).write_text('ran')
    return path


@pytest.fixture(scope='session')
def second_venv(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A virtual environment (no network) that has tether (this checkout's environment,
    added by a ``.pth`` file) and a package the default environment lacks."""
    root = tmp_path_factory.mktemp('envs')
    venv = root / 'second'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(venv)], check=True)
    package = root / 'extra' / PACKAGE
    package.mkdir(parents=True)
    (package / '__init__.py').write_text("VALUE = 'from the second environment'\n")
    python = venv / 'bin' / 'python'
    purelib = subprocess.run(
        [str(python), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()['purelib']  # tether and its dependencies
    (pathlib.Path(purelib) / 'tether_envtest.pth').write_text(
        f'{root / "extra"}\nimport site; site.addsitedir({ours!r})\n'
    )
    return venv


def fake_interpreter(
    directory: pathlib.Path, python: pathlib.Path, reports: dict[str, str]
) -> pathlib.Path:
    """An interpreter that runs ``python`` but, asked for its versions (the endpoint's
    probe, ``-c``), reports ``reports`` instead (another Python, another tether)."""
    edits = ' '.join(f'-e \'s/"{k}": "[^"]*"/"{k}": "{v}"/\'' for k, v in reports.items())
    script = directory / f'python-{uuid.uuid4().hex[:6]}'
    script.write_text(
        '#!/bin/sh\n'
        f'if [ "$1" = "-c" ]; then "{python}" "$@" | sed {edits}; exit 0; fi\n'
        f'exec "{python}" "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.fixture
def endpoint_with(
    prod_service: ServiceThread, start_endpoint: Callable[..., AgentThread]
) -> Callable[..., tuple[AgentThread, Client]]:
    """An endpoint of a new user with ``environments``, and that user's client."""
    clients: list[Client] = []

    def make(**options: Any) -> tuple[AgentThread, Client]:
        user, token = new_user(prod_service)
        ep = start_endpoint(prod_service, user, **options)
        client = Client(prod_service.url, token)
        clients.append(client)
        return ep, client

    yield make  # type: ignore[misc]
    for client in clients:
        client.close()


def test_function_runs_in_the_environment_it_names(
    second_venv: pathlib.Path, endpoint_with: Callable[..., tuple[AgentThread, Client]]
) -> None:
    ep, client = endpoint_with(environments={'extra': {'python': str(second_venv)}})
    eid = ep.config.endpoint_id
    with Executor(eid, client=client, environment='extra') as ex:
        value, executable = ex.submit(uses_package).result(60)
    assert value == 'from the second environment'
    assert executable == str(second_venv / 'bin' / 'python')
    with Executor(eid, client=client) as ex:  # the default environment, unchanged
        assert ex.submit(where_am_i).result(60)[0] == sys.executable
        with pytest.raises(TaskExecutionFailed) as info:
            ex.submit(uses_package).result(60)
    message = str(info.value)
    assert info.value.remote_type == 'ModuleNotFoundError'
    assert f"module '{PACKAGE}'" in message
    assert "environment 'default'" in message
    # What each environment reported, as the service keeps it.
    reported = client.get_endpoint_metadata(eid)['environments']
    assert set(reported) == {'default', 'extra'}
    assert reported['extra']['python'] == '.'.join(map(str, sys.version_info[:3]))
    assert 'pickle' in reported['extra']['serializers']


def test_one_function_in_two_environments_has_two_ids(
    second_venv: pathlib.Path, endpoint_with: Callable[..., tuple[AgentThread, Client]]
) -> None:
    _, client = endpoint_with(environments={'extra': {'python': str(second_venv)}})
    default = client.register_function(uses_package)
    extra = client.register_function(uses_package, environment='extra')
    assert default != extra
    assert client.register_function(uses_package, environment='extra') == extra
    # Globus Compute's container_uuid names an environment (declared by that name).
    assert client.register_function(uses_package, container_uuid='extra') == extra
    with pytest.raises(ConfigError, match='neither a name'):
        client.register_function(uses_package, environment='no spaces allowed')


def test_interpreter_named_by_path_and_command_template(
    second_venv: pathlib.Path, endpoint_with: Callable[..., tuple[AgentThread, Client]]
) -> None:
    python = second_venv / 'bin' / 'python'
    # No container runtime on this machine: `env` stands in for `apptainer exec {image}`.
    template = {'command': 'env TETHER_ENVTEST_MARK={image} {python}', 'image': 'boxed'}
    ep, client = endpoint_with(environments={'boxed': {**template, 'python': str(python)}})
    eid = ep.config.endpoint_id
    with Executor(eid, client=client, environment='boxed') as ex:
        assert ex.submit(where_am_i).result(60) == (str(python), 'boxed')
        ex.environment = str(second_venv)  # a path: probed when first asked for
        assert ex.submit(uses_package).result(60)[1] == str(python)
    # Reported with the endpoint's next heartbeat (every 0.5 s here), not with the result.
    wait_for(
        lambda: str(second_venv) in client.get_endpoint_metadata(eid)['environments'],
        60,
        'the probed environment in the metadata',
    )


def test_unknown_environment_refused_at_submission_and_at_the_endpoint(
    endpoint_with: Callable[..., tuple[AgentThread, Client]],
) -> None:
    ep, client = endpoint_with()
    eid = ep.config.endpoint_id
    with (
        Executor(eid, client=client, environment='gpu') as ex,
        pytest.raises(ConfigError, match=f"endpoint {eid} has no environment 'gpu'"),
    ):
        ex.submit(where_am_i)
    fid = client.register_function(where_am_i, environment='gpu')
    # A client that did not register it cannot check it: the endpoint refuses it.
    with Client(client.service_url, client.token) as other:
        tid = other.run(fid, eid)
        with pytest.raises(TaskExecutionFailed, match="no environment 'gpu'") as info:
            result_of(other, tid)
    assert info.value.remote_type == 'ConfigError'


@pytest.mark.parametrize(
    ('reports', 'expected'),
    [
        ({'python': '3.99.0'}, 'serialized by Python 3'),
        ({'tether': '0.0.1'}, 'has tether 0.0.1, older than'),
    ],
)
def test_environment_that_cannot_read_the_function_refuses_it_before_it_runs(
    second_venv: pathlib.Path,
    endpoint_with: Callable[..., tuple[AgentThread, Client]],
    tmp_path: pathlib.Path,
    reports: dict[str, str],
    expected: str,
) -> None:
    fake = fake_interpreter(tmp_path, second_venv / 'bin' / 'python', reports)
    ep, client = endpoint_with(environments={'old': {'python': str(fake)}})
    eid = ep.config.endpoint_id
    marker = tmp_path / 'ran'
    with (
        Executor(eid, client=client, environment='old') as ex,
        pytest.raises(VersionMismatch, match=expected),
    ):
        ex.submit(touch, str(marker))
    fid = client.register_function(touch, environment='old')
    with Client(client.service_url, client.token) as other:  # unchecked here: the endpoint
        tid = other.run(fid, eid, str(marker))
        with pytest.raises(TaskExecutionFailed, match=expected) as info:
            result_of(other, tid)
    assert info.value.remote_type == 'VersionMismatch'
    assert not marker.exists()
    assert ep.agent.engine.stats()['workers'] == 0  # no worker was started for it


def test_a_task_the_allowlists_refuse_probes_no_interpreter(
    tmp_path: pathlib.Path, endpoint_with: Callable[..., tuple[AgentThread, Client]]
) -> None:
    probed = tmp_path / 'probed'
    script = tmp_path / 'python-watched'
    script.write_text(f'#!/bin/sh\ntouch "{probed}"\nexec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    ep, client = endpoint_with(allowed_serializers=['DillCodeSource', 'json'])
    fid = client.register_function(touch, environment=str(script))
    tid = client.run(fid, ep.config.endpoint_id, str(tmp_path / 'ran'))
    with pytest.raises(TaskExecutionFailed) as info:
        result_of(client, tid)
    assert info.value.remote_type == 'SerializerNotAllowedError'
    assert not probed.exists()  # the path the function names was never started


def test_missing_interpreter_is_reported_and_refused(
    tmp_path: pathlib.Path, endpoint_with: Callable[..., tuple[AgentThread, Client]]
) -> None:
    missing = tmp_path / 'nowhere' / 'bin' / 'python'
    # min_workers: the endpoint starts all the same (the workers cannot, and it says so).
    ep, client = endpoint_with(environments={'gone': {'python': str(missing), 'min_workers': 1}})
    eid = ep.config.endpoint_id
    assert 'is not a Python interpreter' in ep.agent.environments.summary()['gone']['error']
    with (
        Executor(eid, client=client, environment='gone') as ex,
        pytest.raises(ConfigError, match='is not a Python interpreter'),
    ):
        ex.submit(where_am_i)


def test_environment_without_tether_is_reported(tmp_path: pathlib.Path) -> None:
    bare = tmp_path / 'bare'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(bare)], check=True)
    info = probe(str(bare), {})
    assert info['python'] == '.'.join(map(str, sys.version_info[:3]))
    assert 'cannot import tether' in info['error']
    assert 'install tether there' in info['error']


def test_a_probe_line_that_is_not_an_object_is_an_error(tmp_path: pathlib.Path) -> None:
    liar = tmp_path / 'liar'
    liar.write_text("#!/bin/sh\necho 'TETHER-ENVIRONMENT [1, 2]'\n")
    liar.chmod(0o755)
    info = probe(str(liar), {})
    assert 'without reporting its versions' in info['error']


def test_a_probe_that_prints_too_much_is_stopped(tmp_path: pathlib.Path) -> None:
    # Its output is read up to 64 KiB: a valid report after a flood is not believed.
    flood = tmp_path / 'flood'
    flood.write_text(
        '#!/bin/sh\n'
        'head -c 2000000 /dev/zero | tr "\\0" x\n'
        'echo\n'
        """echo 'TETHER-ENVIRONMENT {"python": "3.11.0", "tether": "0.1.0"}'\n"""
    )
    flood.chmod(0o755)
    info = probe(str(flood), {})
    assert 'printed more than 64 KiB' in info['error'], info
    assert 'python' not in info


def test_interpreters_named_by_path_are_at_most_max_environments_at_once(
    tmp_path: pathlib.Path,
) -> None:
    # Probes from several tasks at once: each holds its place while it runs, so no more
    # than MAX_ENVIRONMENTS run even when all of them start before any ends; a path
    # probed by two tasks at once is probed once.
    started, release = tmp_path / 'started', tmp_path / 'release'
    started.mkdir()
    paths = []
    for i in range(MAX_ENVIRONMENTS + 4):
        python = tmp_path / f'python{i}'
        python.write_text(
            '#!/bin/sh\n'
            f'touch "{started}/{i}.$$"\n'
            f'while [ ! -e "{release}" ]; do sleep 0.01; done\n'
            """echo 'TETHER-ENVIRONMENT {"python": "3.11.0", "tether": "0.1.0"}'\n"""
        )
        python.chmod(0o755)
        paths.append(str(python))
    envs = Environments({}, 'process')
    errors: list[Exception] = []

    def probe_one(path: str) -> None:
        try:
            envs.probe_path(path)
        except ConfigError as e:
            errors.append(e)

    threads = [
        threading.Thread(target=probe_one, args=(p,), daemon=True) for p in [*paths, paths[0]]
    ]
    try:
        threads[0].start()  # the first path's probe holds its place before the others ask
        wait_for(lambda: any(started.iterdir()), timeout=60)
        for thread in threads[1:]:
            thread.start()
        wait_for(
            lambda: (
                len(list(started.iterdir())) > MAX_ENVIRONMENTS
                or (len(list(started.iterdir())) == MAX_ENVIRONMENTS and len(errors) == 4)
            ),
            timeout=60,
        )
    finally:
        release.touch()  # the probes end, whatever happened
    for thread in threads:
        thread.join(60)
    assert len(list(started.iterdir())) == MAX_ENVIRONMENTS
    assert len(envs.infos) == MAX_ENVIRONMENTS
    assert paths[0] in envs.infos
    assert len(errors) == 4
    assert all(f'runs {MAX_ENVIRONMENTS} environments already' in str(e) for e in errors)


@pytest.mark.parametrize(
    ('table', 'message'),
    [
        ({'python': 'bin/python'}, 'must be an absolute path'),
        ({}, 'set python'),
        ({'command': 'apptainer exec {image}', 'image': 'x.sif'}, 'must contain {python}'),
        ({'command': 'apptainer exec {image} {python}'}, 'image is not set'),
        ({'command': 'run {python} {other}'}, 'not a valid template'),
        ({'python': '/usr/bin/python3', 'min_workers': 3, 'max_workers': 1}, 'min_workers'),
        ({'python': '/usr/bin/python3', 'pyhton': 'x'}, 'not a setting here'),
    ],
)
def test_environment_tables_are_validated(
    tmp_path: pathlib.Path, table: dict[str, Any], message: str
) -> None:
    import tomli_w

    path = tmp_path / 'config.toml'
    data = {'name': 'ep', 'endpoint_id': 'x', 'service_url': 'http://127.0.0.1:1'}
    path.write_text(tomli_w.dumps({**data, 'environments': {'env': table}}))
    with pytest.raises(ConfigError, match=message):
        EndpointConfig.from_toml(path)
    path.write_text(tomli_w.dumps({**data, 'environments': {'default': {'python': '/x'}}}))
    with pytest.raises(ConfigError, match='the default one'):
        EndpointConfig.from_toml(path)


def test_parsl_engine_refuses_other_environments() -> None:
    envs = Environments({}, 'parsl')
    envs.probe_declared()
    assert envs.summary() == {}
    assert envs.key_of({'environment': None}) == ''
    with pytest.raises(ConfigError, match='needs engine "process" or "managers"'):
        envs.key_of({'environment': 'gpu'})


def test_version_rules() -> None:
    info = {'python': '3.11.2', 'tether': '0.1.0', 'serializers': ['json', 'source', 'tether']}
    check_readable({'python': '3.11.9', 'tether': '0.1.5', 'serializer': 'source'}, info, 'e')
    with pytest.raises(VersionMismatch, match=r'same Python MAJOR\.MINOR'):
        check_readable({'python': '3.12.0', 'serializer': 'pickle'}, info, 'e')
    check_readable({'python': '3.12.0', 'serializer': 'source'}, info, 'e')  # source: any
    with pytest.raises(ConfigError, match='install cloudpickle there'):
        check_readable({'python': '3.11.0', 'serializer': 'pickle'}, info, 'e')
    with pytest.raises(VersionMismatch, match=r'older than the 0\.2'):
        check_readable({'tether': '0.2.0-dev', 'serializer': 'source'}, info, 'e')
    assert open_envelope(b'\x80plain pickle') == (None, b'\x80plain pickle')


def test_pool_keeps_a_bounded_pool_per_environment(second_venv: pathlib.Path) -> None:
    config = EndpointConfig(
        name='ep',
        endpoint_id='e',
        service_url='http://127.0.0.1:1',
        max_workers=2,
        idle_timeout_s=0.5,
        worker_prefetch=0,
        environments={'extra': {'python': str(second_venv), 'max_workers': 1}},
    )
    results: dict[str, Any] = {}
    engine = ProcessPoolEngine(
        config, lambda ids: None, lambda h, p: results.update({h['task_id']: (h, p)})
    )
    engine.start()
    try:
        extra = [make_task(where_am_i) for _ in range(3)]
        for task in extra:
            task.environment = 'extra'
        default = [make_task(where_am_i) for _ in range(2)]
        peak: list[int] = []

        def extra_workers() -> int:
            n = sum(1 for w in list(engine._workers) if w.environment == 'extra')
            peak.append(n)
            return n

        engine.submit(extra + default)
        wait_for(lambda: extra_workers() >= 0 and len(results) == 5, 60, 'five results')
        python = str(second_venv / 'bin' / 'python')
        for task in extra:
            assert task_value(*results[task.task_id])[0] == python
        for task in default:
            assert task_value(*results[task.task_id])[0] == sys.executable
        assert max(peak) <= 1
        wait_for(lambda: extra_workers() == 0, 60, 'the idle worker of extra to stop')
    finally:
        engine.stop()


def test_the_example_of_the_docs_is_valid(tmp_path: pathlib.Path) -> None:
    import re

    page = pathlib.Path(__file__).resolve().parents[2] / 'docs' / 'faas.md'
    blocks = re.findall(r'^```toml\n(.*?)^```', page.read_text(), re.MULTILINE | re.DOTALL)
    (example,) = [b for b in blocks if '[environments.' in b]
    path = tmp_path / 'config.toml'
    head = 'name = "ep"\nendpoint_id = "x"\nservice_url = "http://127.0.0.1:1"\n'
    path.write_text(head + example)
    config = EndpointConfig.from_toml(path)
    assert set(config.environments) == {'ml', 'gpu'}
    gpu = config.environments['gpu']
    assert gpu.image == '/images/pytorch.sif'
    from tether.faas.endpoint._environments import argv_of

    assert argv_of('gpu', config.environments) == [
        'apptainer',
        'exec',
        '--nv',
        '/images/pytorch.sif',
        'python3',
    ]


def test_pool_fails_the_tasks_of_an_environment_that_cannot_start(
    tmp_path: pathlib.Path,
) -> None:
    gone = tmp_path / 'removed' / 'bin' / 'python'  # probed fine once, removed since
    config = EndpointConfig(
        name='ep',
        endpoint_id='e',
        service_url='http://127.0.0.1:1',
        environments={'gone': {'python': str(gone)}},
    )
    results: dict[str, Any] = {}
    engine = ProcessPoolEngine(
        config, lambda ids: None, lambda h, p: results.update({h['task_id']: h})
    )
    engine.start()
    try:
        tasks = [make_task(where_am_i) for _ in range(2)]
        for task in tasks:
            task.environment = 'gone'
        engine.submit(tasks)
        wait_for(lambda: len(results) == 2, 60, 'both tasks to fail')
        for task in tasks:
            error = results[task.task_id]['error']
            assert results[task.task_id]['status'] == 'failed'
            assert "the workers of environment 'gone' cannot start" in error['message']
        assert engine.stats()['workers'] == 0
    finally:
        engine.stop()


def test_managers_engine_runs_each_task_in_its_environment(second_venv: pathlib.Path) -> None:
    from tether.faas.endpoint._managers import ManagersEngine

    config = EndpointConfig(
        name='ep',
        endpoint_id='e',
        service_url='http://127.0.0.1:1',
        engine='managers',
        managers=2,
        max_workers=1,
        environments={'extra': {'python': str(second_venv)}},
    )
    results: dict[str, Any] = {}
    engine = ManagersEngine(
        config, lambda ids: None, lambda h, p: results.update({h['task_id']: (h, p)})
    )
    engine.start()
    try:
        tasks = [make_task(where_am_i) for _ in range(4)]
        for task in tasks[:2]:
            task.environment = 'extra'
        engine.submit(tasks)
        wait_for(lambda: len(results) == 4, 60, 'four results')
        python = str(second_venv / 'bin' / 'python')
        assert [task_value(*results[t.task_id])[0] for t in tasks] == [
            python,
            python,
            sys.executable,
            sys.executable,
        ]
    finally:
        engine.stop()
