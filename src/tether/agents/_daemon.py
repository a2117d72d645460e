"""``python -m tether.agents._daemon SPEC``: the supervisor of one daemon agent."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import pickle
import signal
import sys
import time
from typing import Any

__all__ = ['main']


def main(spec_path: str) -> int:
    """Run the agent of the spec file under a process launcher until it stops for good."""
    logging.basicConfig(level=logging.INFO, format='%(asctime)s %(name)s %(message)s')
    from tether.agents.launcher.process import ProcessLauncher

    path = pathlib.Path(spec_path)
    with open(path, 'rb') as f:
        data: dict[str, Any] = pickle.load(f)
    spec = data['spec']
    record_path = path.with_suffix('.json')
    launcher = ProcessLauncher(restart=data['restart'])

    def stop(signum: int, frame: Any) -> None:
        launcher.close(timeout=10)

    signal.signal(signal.SIGTERM, stop)
    launcher.launch(spec)
    record = {
        'agent_id': spec.agent_id,
        'pid': os.getpid(),
        'behavior': f'{type(spec.behavior).__module__}.{type(spec.behavior).__qualname__}',
        'exchange_kind': data['kind'],
        'exchange': spec.exchange.config(),
        'started': time.time(),
        'log': str(path.with_suffix('.log')),
    }
    tmp = record_path.with_suffix('.tmp')
    tmp.write_text(json.dumps(record))
    os.replace(tmp, record_path)
    try:
        launcher.wait(spec.agent_id)
    finally:
        for p in (record_path, path):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
