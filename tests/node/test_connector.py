"""NodeConnector: one server per host, shared by processes, outliving them; failures."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.node.conftest import SECRET, wait_gone
from tether.connectors.node import NodeConnector, NodeKey
from tether.exceptions import ConnectorClosedError, ConnectorError
from tether.node import read_state
from tether.store import Store


@pytest.fixture
def node_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Connector config with a unique server name and run directory; server stopped after."""
    # The secret never travels in a proxy: the processes that resolve one (this one and
    # the children, which inherit the environment) find it in the environment.
    monkeypatch.setenv('TETHER_NODE_SECRET', SECRET)
    config: dict[str, Any] = {
        'name': f'test-{uuid.uuid4().hex[:10]}',
        'address': '127.0.0.1',
        'run_dir': str(tmp_path / 'run'),
        'secret': SECRET,
        'idle_timeout': 120.0,
    }
    yield config
    NodeConnector(**config).stop_server()


def run_python(code: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, '-c', textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


_PRODUCER = """
    import pickle, sys
    from tether.connectors.node import NodeConnector
    from tether.store import Store
    config = eval(sys.argv[1])
    store = Store('shared', NodeConnector(**config))
    proxy = store.proxy({'payload': list(range(1000))})
    print(store.connector.status().pid)
    print(pickle.dumps(proxy).hex())
"""


def test_one_server_per_host_shared_and_outliving_its_starter(
    node_config: dict[str, Any],
) -> None:
    # Two processes start at once: exactly one server is spawned, both use it.
    results: list[str] = []

    def produce() -> None:
        results.append(run_python(_PRODUCER, repr(node_config)))

    threads = [threading.Thread(target=produce) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pids = {int(out.split()[0]) for out in results}
    assert len(pids) == 1
    (pid,) = pids
    # The producers have exited; the server still runs and serves their objects.
    state = read_state(Path(node_config['run_dir']), node_config['name'])
    assert state is not None
    assert state.pid == pid
    for out in results:
        proxy = pickle.loads(bytes.fromhex(out.split()[1]))
        assert proxy['payload'][-1] == 999
    c = NodeConnector(**node_config)
    assert c.status().objects == 3
    c.close()


def test_proxy_resolves_in_another_process(node_config: dict[str, Any]) -> None:
    store = Store('node-proxy', NodeConnector(**node_config), register=True)
    proxy = store.proxy(list(range(100)), populate_target=False)
    out = run_python(
        """
        import pickle, sys
        p = pickle.loads(bytes.fromhex(sys.argv[1]))
        print(sum(p))
        """,
        pickle.dumps(proxy).hex(),
    )
    assert int(out) == sum(range(100))
    store.close()


def test_keys_name_the_holder(node_config: dict[str, Any]) -> None:
    c = NodeConnector(**node_config)
    key = c.put(b'x')
    assert isinstance(key, NodeKey)
    state = read_state(Path(node_config['run_dir']), node_config['name'])
    assert state is not None
    assert (key.host, key.port) == ('127.0.0.1', state.port)
    assert len(pickle.dumps(key)) < 120
    c.close()


def test_idle_server_stops_by_itself(node_config: dict[str, Any]) -> None:
    c = NodeConnector(**{**node_config, 'idle_timeout': 0.5})
    c.put(b'x')
    pid = c.status().pid
    c.close()
    assert wait_gone(pid)
    assert read_state(Path(node_config['run_dir']), node_config['name']) is None


def test_dead_server_gives_connector_error_and_is_replaced(node_config: dict[str, Any]) -> None:
    c = NodeConnector(**node_config)
    key = c.put(b'lost')
    pid = c.status().pid
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    start = time.monotonic()
    with pytest.raises(ConnectorError, match=f'{key.host}:{key.port}'):
        c.get(key)
    assert time.monotonic() - start < node_config.get('timeout', 30.0)
    with pytest.raises(ConnectorError):
        c.exists(key)
    # The same connector's next put starts a fresh server on this host.
    again = c.put(b'again')
    assert c.status().pid != pid
    assert bytes(c.get(again)) == b'again'
    c.stop_server()
    c.close()
    # A new connector finds the stale discovery file and starts a fresh server.
    fresh = NodeConnector(**node_config)
    new_key = fresh.put(b'new')
    assert fresh.status().pid != pid
    assert bytes(fresh.get(new_key)) == b'new'
    fresh.close()


def test_closed_connector_refuses_work(node_config: dict[str, Any]) -> None:
    c = NodeConnector(**node_config)
    key = c.put(b'x')
    c.close()
    with pytest.raises(ConnectorClosedError):
        c.get(key)


def test_server_failing_to_start_is_reported(tmp_path: Path) -> None:
    taken = NodeConnector(
        f'test-{uuid.uuid4().hex[:8]}',
        address='127.0.0.1',
        run_dir=str(tmp_path / 'a'),
        secret=SECRET,
    )
    taken.put(b'x')
    port = taken.status().port
    clash = NodeConnector(
        f'test-{uuid.uuid4().hex[:8]}',
        address='127.0.0.1',
        port=port,
        run_dir=str(tmp_path / 'b'),
        secret=SECRET,
    )
    with pytest.raises(ConnectorError, match='exited during start-up'):
        clash.put(b'y')
    clash.close()
    taken.close(stop_server=True)


def test_wrong_secret_for_existing_server(node_config: dict[str, Any]) -> None:
    c = NodeConnector(**node_config)
    c.put(b'x')
    other = NodeConnector(**{**node_config, 'secret': 'another secret'})
    with pytest.raises(ConnectorError, match='secret'):
        other.put(b'y')
    other.close()
    c.close()


def test_concurrent_gets_of_one_large_object(node_config: dict[str, Any]) -> None:
    c = NodeConnector(**node_config)
    data = os.urandom(16 * 1024 * 1024)
    key = c.put(data)
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            for _ in range(3):
                assert bytes(c.get(key)) == data
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=fetch) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    c.close()


def test_large_batches(node_config: dict[str, Any]) -> None:
    # Headers of these requests are larger than the server's 64 KiB read buffer.
    c = NodeConnector(**node_config)
    datas = [f'item-{i}'.encode() for i in range(5000)]
    keys = c.put_batch(datas)
    got = c.get_batch(keys)
    assert [bytes(g) for g in got] == datas  # type: ignore[arg-type]
    c.close()
