"""The seed's figure 2.3: an application defined by an App and an AppConfig class.

Only the imports differ from the figure (and the bodies the figure elides are written).
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import Field

from tether.bench.apps import AppConfig
from tether.bench.engine import Engine
from tether.bench.plugins import register


@register('app')
class FooAppConfig(AppConfig):
    name: str = 'foo'
    sleep: float = Field(description='...')
    count: int = Field(1, description='...')

    def get_app(self) -> FooApp:
        return FooApp(sleep=self.sleep, count=self.count)


class FooApp:
    def __init__(self, sleep: float, count: int) -> None:
        self.sleep = sleep
        self.count = count

    def run(self, engine: Engine, run_dir: Path) -> None:
        futures = [engine.submit(time.sleep, self.sleep) for _ in range(self.count)]
        for future in futures:
            future.result()
        (run_dir / 'foo.txt').write_text(f'{self.count} tasks\n')

    def close(self) -> None: ...
