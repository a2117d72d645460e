"""Large values by proxy through a hosted exchange's store (on loopback; the two-site run
in network namespaces is test_multisite.py)."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tether.agents import Behavior, Manager, action
from tether.agents.exchange import HttpExchange
from tether.agents.exchange.hosted import HostedExchangeServer, UserRecord, hash_token
from tether.agents.launcher import ThreadLauncher
from tether.connectors.file import FileConnector
from tether.exceptions import FrameTooLargeError
from tether.proxy import Proxy, is_resolved
from tether.store import Store

ROOT = Path(__file__).resolve().parents[2]


class Squarer(Behavior):
    @action
    def square(self, values: np.ndarray) -> np.ndarray:
        return values**2

    @action
    def nbytes(self, values: np.ndarray) -> int:
        return int(np.asarray(values).nbytes)

    @action
    def total(self, values: np.ndarray) -> float:
        return float(np.asarray(values).sum())


@pytest.fixture
def server() -> Iterator[HostedExchangeServer]:
    users = {'alice': UserRecord('alice', hash_token('alice-token'))}
    with HostedExchangeServer(users) as s:
        yield s


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f'hosted-store-{tmp_path.name}', FileConnector(str(tmp_path / 'objects')))
    yield s
    s.close()


def test_values_over_the_threshold_go_by_proxy(server: HostedExchangeServer, store: Store) -> None:
    exchange = HttpExchange(server.url, token='alice-token', store=store, threshold=100_000)
    try:
        with Manager(exchange, ThreadLauncher()) as manager:
            squarer = manager.launch(Squarer())
            big = np.arange(500_000, dtype=np.float64)  # 4 MB: over the 1 MiB message limit
            result = squarer.square(big).result(60)
            assert isinstance(result, Proxy)
            assert not is_resolved(result)
            # Passed on unresolved: the agent reads it from the store (once: it is evicted
            # when first resolved).
            assert squarer.total(result).result(60) == float((big**2).sum())
            again = squarer.square(big).result(60)
            assert np.array_equal(np.asarray(again), big**2)  # resolved here this time
            small = squarer.square(np.ones(10)).result(60)  # under the threshold: inline
            assert not isinstance(small, Proxy)
    finally:
        exchange.close()


def test_without_a_store_a_large_value_is_refused_before_it_is_sent(
    server: HostedExchangeServer,
) -> None:
    exchange = HttpExchange(server.url, token='alice-token')
    try:
        with Manager(exchange, ThreadLauncher()) as manager:
            squarer = manager.launch(Squarer())
            with pytest.raises(FrameTooLargeError):
                squarer.square(np.ones(500_000)).result(60)
            assert squarer.nbytes(np.ones(10)).result(60) == 80  # and the agent serves on
    finally:
        exchange.close()


def test_a_copy_carries_the_store_configuration_not_the_store(
    server: HostedExchangeServer, store: Store, tmp_path: Path
) -> None:
    exchange = HttpExchange(server.url, token='alice-token', store=store, threshold=1000)
    state = exchange.__getstate__()
    assert state['_store'] is None
    assert state['_token_value'] is None
    # Another process builds its own store from the configuration and sends through it.
    code = textwrap.dedent(
        """
        import pickle, sys
        import numpy as np
        from tether.proxy import Proxy
        exchange = pickle.loads(bytes.fromhex(sys.stdin.read()))
        store = exchange.store()
        assert store is not None and store.name == sys.argv[1], store
        exchange.close()
        print('ok')
        """
    )
    done = subprocess.run(
        [sys.executable, '-c', code, store.name],
        input=pickle.dumps(exchange).hex(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={'TETHER_EXCHANGE_TOKEN': 'alice-token', 'PATH': '/usr/bin:/bin'},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == 'ok'
    exchange.close()


def test_the_factory_passes_the_store_on(server: HostedExchangeServer, store: Store) -> None:
    from tether.agents.exchange.http import HttpExchangeFactory

    factory = HttpExchangeFactory(
        server.url,
        additional_headers={'Authorization': 'Bearer alice-token'},
        store=store,
        threshold=5000,
    )
    exchange = factory.exchange()
    assert isinstance(exchange, HttpExchange)
    assert exchange.store() is store
    assert exchange.threshold == 5000
