"""An academy-py 1.0 style program (written for this test) runs with tether's imports.

It does what academy-py's first examples do: a user calls an agent's actions, an agent
runs a control loop, and an agent calls two other agents through handles it was given.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tether.agents import Agent, action, loop
from tether.agents.aio import Manager, recommended_logging
from tether.agents.exchange import LocalExchangeFactory
from tether.agents.handle import Handle


class Tally(Agent):
    async def agent_on_startup(self) -> None:
        self.total = 0
        self.ticked = asyncio.Event()

    @action
    async def bump(self, by: int = 1) -> None:
        self.total += by

    @action
    async def total_now(self) -> int:
        return self.total

    @loop
    async def tick(self, shutdown: asyncio.Event) -> None:
        self.total += 100
        self.ticked.set()
        await shutdown.wait()

    @action
    async def wait_ticked(self) -> bool:
        await self.ticked.wait()
        return True


class Upper(Agent):
    @action
    async def upper(self, text: str) -> str:
        return text.upper()


class Joiner(Agent):
    def __init__(self, left: Handle[Any], right: Handle[Any]) -> None:
        self.left = left
        self.right = right

    @action
    async def join(self, text: str) -> str:
        a = await self.left.upper(text)
        b = await self.right.upper(text[::-1])
        return f'{a}|{b}'


async def program() -> tuple[int, str]:
    async with await Manager.from_exchange_factory(
        factory=LocalExchangeFactory(),
        executors=ThreadPoolExecutor(),
        log_config=recommended_logging(),
    ) as manager:
        tally = await manager.launch(Tally)
        await tally.wait_ticked()
        for _ in range(3):
            await tally.bump()
        total = await tally.total_now()

        left = await manager.launch(Upper)
        right = await manager.launch(Upper)
        joiner = await manager.launch(Joiner, args=(left, right))
        joined = await joiner.join('abc')
    return total, joined


def test_academy_style_program_runs() -> None:
    assert asyncio.run(program()) == (103, 'ABC|CBA')
