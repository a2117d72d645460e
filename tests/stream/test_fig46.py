"""Figure 4.6's program runs with only its imports changed (Redis streams for Kafka)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.conftest import count_keys
from tests.stream._fig46_compat import PREFIX_ENV


def test_figure_4_6_program(
    redis_client: Any,
    unique_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PREFIX_ENV, unique_prefix)  # inherited by the spawned workers
    # No stream key is configured: both workers use the user's key file (created on first
    # use), so the producer signs its events and the consumer (which has no store of its
    # own) accepts the store that the authenticated producer names.
    for name in ('TETHER_STREAM_KEY', 'TETHER_STREAM_KEY_FILE'):
        monkeypatch.delenv(name, raising=False)
    from tests.stream import fig46_program

    try:
        assert fig46_program.main() == list(range(10))
        entries = redis_client.xrange(f'{unique_prefix}topic')
        assert len(entries) == 11  # ten objects and the end of the stream, each signed
        assert all(b'"mac":"' in value for _, fields in entries for value in fields.values())
        # evict=True by default: the consumer's proxies removed every object once used.
        assert count_keys(redis_client, unique_prefix) == 1  # only the stream is left
    finally:
        for key in redis_client.scan_iter(match=f'{unique_prefix}*'):
            redis_client.delete(key)
    assert os.environ[PREFIX_ENV] == unique_prefix
