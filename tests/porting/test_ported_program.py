"""A ProxyStore-style program runs on tether with only its import lines changed.

``PROGRAM`` is written against ProxyStore's documented API (its names, call shapes and
behaviours). The test rewrites its ``proxystore`` imports with the module table of
``docs/porting.md`` and nothing else, then runs it in a fresh interpreter.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import textwrap

DOC = pathlib.Path(__file__).resolve().parents[2] / 'docs' / 'porting.md'

PROGRAM = textwrap.dedent(
    """
    import pickle
    import queue
    import sys
    import threading

    from proxystore.connectors.file import FileConnector
    from proxystore.connectors.local import LocalConnector
    from proxystore.factory import LambdaFactory, SimpleFactory
    from proxystore.proxy import Proxy, ProxyLocker, extract, is_resolved
    from proxystore.store import Store, get_store, store_registration
    from proxystore.store.config import ConnectorConfig, StoreConfig
    from proxystore.store.exceptions import NonProxiableTypeError
    from proxystore.store.lifetimes import ContextLifetime, LeaseLifetime
    from proxystore.store.ref import MutableBorrowError, borrow, mut_borrow
    from proxystore.store.utils import get_key
    from proxystore.stream import StreamConsumer, StreamProducer
    from proxystore.stream.filters import NullFilter
    from proxystore.stream.shims.queue import QueuePublisher, QueueSubscriber


    def square(x):
        return x * x


    def main(tmp):
        p = Proxy(LambdaFactory(square, 7))
        assert not is_resolved(p)
        assert p + 1 == 50
        assert isinstance(Proxy(SimpleFactory([1, 2])), list)
        assert ProxyLocker(p).unlock() is p

        with FileConnector(tmp + '/check') as connector:
            key = connector.new_key(b'reserved')
            assert not connector.exists(key)

        with Store('ported', FileConnector(tmp), metrics=True, register=True) as store:
            x = store.proxy([1, 2, 3])
            y = pickle.loads(pickle.dumps(x))
            assert y == [1, 2, 3]
            key = get_key(x)
            assert store.exists(key)
            store.get(key)
            assert store.is_cached(key)
            assert store.metrics.get_metrics(x) is not None

            batch = store.proxy_batch([1, None, 3], skip_nonproxiable=True)
            assert batch[1] is None
            assert extract(batch[2]) == 3
            try:
                store.proxy(None)
            except NonProxiableTypeError:
                pass
            else:
                raise AssertionError('None was proxied')

            with ContextLifetime(store) as lifetime:
                one = store.put('tmp', lifetime=lifetime)
                two = store.put_batch(['a', 'b'], lifetime=lifetime)
            assert not store.exists(one)
            assert not any(store.exists(k) for k in two)
            assert LeaseLifetime(store, expiry=-1).done()
            try:
                store.proxy(1, evict=True, lifetime=ContextLifetime(store))
            except ValueError:
                pass
            else:
                raise AssertionError('evict=True with a lifetime was accepted')

            owned = store.owned_proxy([1, 2])
            shared = borrow(owned)
            try:
                mut_borrow(owned)
            except MutableBorrowError:
                pass
            else:
                raise AssertionError('a mutable borrow next to a shared one')
            del shared

            future = store.future()
            setter = threading.Thread(target=future.set_result, args=(42,))
            setter.start()
            assert future.result() == 42
            setter.join()

            q = queue.Queue()
            producer = StreamProducer(QueuePublisher({'t': q}), stores={'t': store})
            producer.send('t', [9], evict=True)
            producer.close(topics=['t'])
            consumer = StreamConsumer(QueueSubscriber(q), filter_=NullFilter())
            assert [list(item) for item in consumer] == [[9]]

        config = StoreConfig(name='from-config', connector=ConnectorConfig(kind='local'))
        other = Store.from_config(config)
        assert isinstance(other.connector, LocalConnector)
        with store_registration(other):
            assert get_store('from-config') is other
        assert get_store('from-config') is None
        print('ok')


    main(sys.argv[1])
    """
)


def module_map() -> dict[str, str]:
    section = DOC.read_text().split('## Changing the imports', 1)[1].split('\n## ', 1)[0]
    return dict(re.findall(r'^\| `(proxystore[\w.]*)` \| `(tether[\w.]*)` \|$', section, re.M))


def port(source: str) -> str:
    """Rewrite ``from proxystore.X import ...`` lines with the documented module map."""
    mapping = module_map()

    def rewrite(m: re.Match[str]) -> str:
        module = m[1]
        if module not in mapping:
            raise AssertionError(f'docs/porting.md does not say where {module} went')
        return f'from {mapping[module]} import'

    return re.sub(r'^from (proxystore[\w.]*) import', rewrite, source, flags=re.M)


def test_only_import_lines_change() -> None:
    ported = port(PROGRAM)
    changed = [
        (a, b) for a, b in zip(PROGRAM.splitlines(), ported.splitlines(), strict=True) if a != b
    ]
    assert changed
    assert all(a.startswith('from proxystore') and b.startswith('from tether') for a, b in changed)
    assert 'proxystore' not in ported


def test_ported_program_runs(tmp_path: pathlib.Path) -> None:
    script = tmp_path / 'ported.py'
    script.write_text(port(PROGRAM))
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / 'store')],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == 'ok'
