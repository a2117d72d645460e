"""The exchange conformance suite of tether.testing catches a broken exchange.

As a third party would run it (its own pytest session), against an exchange broken on
purpose, the suite must report exactly the broken behaviour.
"""

from __future__ import annotations

from pathlib import Path

from tests.testing.test_suites import run_pytest


def test_exchange_suite_catches_a_broken_exchange(tmp_path: Path) -> None:
    code, failed = run_pytest(
        tmp_path,
        """
        import pytest

        from tether.agents._codec import Codec
        from tether.agents.exchange import ThreadExchange
        from tether.agents.exchange.thread import _ThreadTransport
        from tether.testing.agents import ExchangeConformance


        class Forgetful(_ThreadTransport):
            # Requests left in a terminated mailbox vanish: their callers would wait.
            def answer_dropped(self, mailbox_id, items):
                pass


        class Broken(ThreadExchange):
            def __init__(self):
                super().__init__()
                self._transport = Forgetful(Codec(allow_pickle=True))


        class TestBroken(ExchangeConformance):
            timeout = 3.0  # the answers of a working exchange come at once

            @pytest.fixture
            def exchange(self):
                exchange = Broken()
                yield exchange
                exchange.close()
        """,
    )
    assert code == 1
    assert failed == {'test_requests_left_in_a_terminated_mailbox_are_answered'}
