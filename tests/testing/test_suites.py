"""The conformance suites of tether.testing catch broken implementations.

tether's own connectors and shims pass them (tests/connectors, tests/stream), and
docs/testing.md runs them against a third-party connector and shim. Here each suite runs,
as a third party would run it (its own pytest session), against implementations that are
broken on purpose, and must report exactly the broken behaviour.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def run_pytest(tmp_path: Path, source: str) -> tuple[int, set[str]]:
    """Run ``source`` as a test module in a fresh pytest; return its code and failures."""
    (tmp_path / 'pytest.ini').write_text('[pytest]\n')
    (tmp_path / 'test_third_party.py').write_text(textwrap.dedent(source))
    proc = subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-rf', '-p', 'no:cacheprovider', '.'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    failed = {
        line.split('::')[-1].split(' ')[0]
        for line in proc.stdout.splitlines()
        if line.startswith('FAILED ')
    }
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode, failed


def test_connector_suite_catches_a_broken_connector(tmp_path: Path) -> None:
    code, failed = run_pytest(
        tmp_path,
        """
        import pytest

        from tether.connectors.local import LocalConnector
        from tether.testing.connectors import ConnectorConformance, DeferrableConformance


        class Truncating(LocalConnector):
            # Loses the last byte of every value it reads back.
            def get(self, key):
                data = super().get(key)
                return None if data is None else bytes(data)[:-1]


        class Plain:
            # Puts and gets, but cannot reserve keys.
            def __init__(self):
                self.inner = LocalConnector()

            def __getattr__(self, name):
                if name in ('new_key', 'set'):
                    raise AttributeError(name)
                return getattr(self.inner, name)


        class TestTruncating(ConnectorConformance):
            @pytest.fixture
            def connector(self):
                c = Truncating()
                yield c
                c.close()


        class TestPlain(DeferrableConformance):
            @pytest.fixture
            def connector(self):
                yield Plain()
        """,
    )
    assert code == 1
    assert 'test_put_get_roundtrip' in failed
    assert 'test_large_value' in failed
    assert 'test_concurrent_puts_and_gets' in failed  # through hammer
    assert 'test_deferrable' in failed
    # What the broken connector still does right passes.
    assert 'test_keys_are_unique' not in failed
    assert 'test_missing_key_gets_none' not in failed


def test_shim_suite_catches_a_broken_shim(tmp_path: Path) -> None:
    code, failed = run_pytest(
        tmp_path,
        """
        import collections
        import queue

        import pytest

        from tether.stream.shims.queue import QueuePublisher, QueueSubscriber
        from tether.testing.stream import ShimConformance, ShimHarness


        class Repeating(QueueSubscriber):
            # Delivers the raw message b'm5' twice.
            def __init__(self, *args):
                super().__init__(*args)
                self.again = None

            def next_message(self, timeout=None):
                if self.again is not None:
                    message, self.again = self.again, None
                    return message
                message = super().next_message(timeout)
                if message == b'm5':
                    self.again = message
                return message


        class QueueHarness(ShimHarness):
            durable = True

            def __init__(self, subscriber_class):
                super().__init__()
                self.queues = collections.defaultdict(lambda: queue.Queue(1000))
                self.subscriber_class = subscriber_class

            def new_publisher(self):
                return QueuePublisher(self.queues, timeout=5)

            def new_subscriber(self, topic, ident):
                return self.subscriber_class(self.queues[topic], topic)


        class TestRepeating(ShimConformance):
            @pytest.fixture
            def shim(self):
                with QueueHarness(Repeating) as harness:
                    yield harness


        class TestClaimsFanout(ShimConformance):
            # A queue shares messages between subscribers: claiming fan-out is wrong.
            @pytest.fixture
            def shim(self):
                with QueueHarness(QueueSubscriber) as harness:
                    harness.fanout = True
                    yield harness
        """,
    )
    assert code == 1
    assert 'test_raw_messages_in_order' in failed
    assert 'test_two_consumers_share_or_fan_out' in failed
    assert 'test_garbage_raises_a_clear_error' not in failed
