"""The run's environment as an object (TaPS's ``run.env``): collect, format, write as JSON.

The record itself is :func:`environment`'s dictionary (hardware, OS, interpreter, package
versions, thread settings); the run directory's ``environment.json`` holds the same.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tether.bench.run._env import PACKAGES, environment

__all__ = ['Environment', 'PACKAGES', 'environment']


class Environment:
    """What a run records about the machine and the software.

    Args:
        data: :func:`environment`'s dictionary.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f'Environment(hostname={self.data.get("hostname")!r})'

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Environment) and other.data == self.data

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def collect(cls) -> Environment:
        """Collect this process's environment."""
        return cls(environment())

    def format(self) -> str:
        """One ``key: value`` line per entry (packages one per line, indented)."""
        lines = []
        for key, value in self.data.items():
            if isinstance(value, dict):
                lines.append(f'{key}:')
                lines.extend(f'  {k}: {v}' for k, v in value.items())
            else:
                lines.append(f'{key}: {value}')
        return '\n'.join(lines)

    def write_json(self, path: str | os.PathLike[str]) -> None:
        """Write the record to ``path`` as JSON."""
        with open(path, 'w', encoding='utf-8') as f:
            json.dump(self.data, f, indent=2, default=str)
