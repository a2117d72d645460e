"""What an attacker who can publish to a stream's broker sends, and a module that tells on
itself when something imports it."""

from __future__ import annotations

import json
import queue
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.stream.shims.queue import QueueSubscriber


def event_message(
    store: dict[str, Any],
    key: dict[str, Any],
    *,
    topic: str = 't',
    metadata: dict[str, Any] | None = None,
    evict: bool = False,
) -> bytes:
    """A hand-made ``new_object`` message, as an attacker writes it."""
    event = {
        'type': 'new_object',
        'topic': topic,
        'store': store,
        'key': key,
        'metadata': metadata or {},
        'evict': evict,
    }
    doc = {'format': 'tether.stream', 'version': 1, 'events': [event]}
    return json.dumps(doc).encode()


def end_message(topic: str = 't') -> bytes:
    doc = {
        'format': 'tether.stream',
        'version': 1,
        'events': [{'type': 'end_of_stream', 'topic': topic}],
    }
    return json.dumps(doc).encode()


def store_dict(name: str, connector_type: str, **connector_config: Any) -> dict[str, Any]:
    return {'name': name, 'connector_type': connector_type, 'connector_config': connector_config}


def queue_of(*messages: bytes) -> QueueSubscriber:
    """A subscriber whose queue already holds ``messages``."""
    q: queue.Queue[bytes] = queue.Queue()
    for m in messages:
        q.put(m)
    return QueueSubscriber(q, 't')


@dataclass
class Tattletale:
    """A module on ``sys.path`` that writes ``marker`` when imported, and its names."""

    module: str
    marker: Path

    @property
    def imported(self) -> bool:
        return self.marker.exists() or self.module in sys.modules

    @property
    def key_type(self) -> str:
        return f'{self.module}.Key'

    @property
    def connector_type(self) -> str:
        return f'{self.module}.Connector'

    @property
    def function(self) -> str:
        return f'{self.module}.run'


def make_tattletale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tattletale:
    name = f'tether_tattletale_{uuid.uuid4().hex[:8]}'
    marker = tmp_path / 'imported'
    pkg = tmp_path / 'tattle'
    pkg.mkdir()
    (pkg / f'{name}.py').write_text(
        'import pathlib\n'
        'from typing import NamedTuple\n'
        f'pathlib.Path({str(marker)!r}).write_text("imported")\n'
        'class Key(NamedTuple):\n'
        '    name: str\n'
        'class Connector:\n'
        '    @classmethod\n'
        '    def from_config(cls, config):\n'
        '        return cls()\n'
        'def run(*args):\n'
        '    return args\n',
    )
    monkeypatch.syspath_prepend(str(pkg))
    return Tattletale(name, marker)
