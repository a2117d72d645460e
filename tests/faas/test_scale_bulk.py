"""The merging of endpoint sessions' work (tether.faas._bulk.Coalescer): calls made in
the same turn become one flush, and a merged flush that fails fails only the caller
whose items fail alone."""

from __future__ import annotations

import asyncio

import pytest

from tether.exceptions import ProtocolError
from tether.faas._bulk import Coalescer


def test_calls_in_one_turn_are_one_flush_and_a_failure_is_only_its_callers() -> None:
    flushed: list[list[str]] = []

    async def flush(items: list[str]) -> int:
        flushed.append(items)
        if 'bad' in items:
            raise ProtocolError('bad item')
        return len(items)

    async def scenario() -> None:
        merged = Coalescer(flush)
        results = await asyncio.gather(merged.run(['a']), merged.run(['b', 'c']))
        assert results == [3, 3]  # one flush of all three
        assert flushed == [['a', 'b', 'c']]
        flushed.clear()
        outcome = await asyncio.gather(
            merged.run(['d']), merged.run(['bad']), merged.run(['e']), return_exceptions=True
        )
        assert outcome[0] == 1
        assert outcome[2] == 1
        assert isinstance(outcome[1], ProtocolError)
        assert flushed == [['d', 'bad', 'e'], ['d'], ['bad'], ['e']]
        with pytest.raises(ProtocolError):  # alone: its own error at once
            await merged.run(['bad'])

    asyncio.run(scenario())
