"""``python -m tether.agents._daemon SPEC``: the supervisor of one daemon agent.

With metrics on (``DaemonLauncher(metrics=MetricsOptions(port=...))``), the supervisor
serves the agent's Prometheus metrics (see :mod:`tether.agents._metrics`) and writes the
endpoint's address to the daemon's record (``metrics``).
"""

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
    served, block = _metrics(data, spec, launcher, path.with_suffix('.metrics'))

    def stop(signum: int, frame: Any) -> None:
        launcher.close(timeout=10)

    signal.signal(signal.SIGTERM, stop)
    launcher.launch(spec)
    address = served.address() if served is not None else None
    record = {
        'agent_id': spec.agent_id,
        'pid': os.getpid(),
        'behavior': f'{type(spec.behavior).__module__}.{type(spec.behavior).__qualname__}',
        'exchange_kind': data['kind'],
        'exchange': spec.exchange.config(),
        'started': time.time(),
        'log': str(path.with_suffix('.log')),
        'metrics': None if address is None else f'http://{address[0]}:{address[1]}/metrics',
    }
    tmp = record_path.with_suffix('.tmp')
    tmp.write_text(json.dumps(record))
    os.replace(tmp, record_path)
    try:
        launcher.wait(spec.agent_id)
    finally:
        if served is not None:
            served.close()
        if block is not None:
            block.close()
        for p in (record_path, path, path.with_suffix('.metrics')):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
    return 0


def _metrics(
    data: dict[str, Any], spec: Any, launcher: Any, block_path: pathlib.Path
) -> tuple[Any, Any]:
    """Start serving the agent's metrics if asked: ``(served, block)``, or ``(None, None)``.

    The agent process finds the block through the environment, which its fork server
    (started by the first launch) inherits from this process.
    """
    options = data.get('metrics')
    if options is None or not options.enabled:
        return None, None
    from tether.agents._metrics import METRICS_FILE_ENV, StatsBlock, daemon_metrics
    from tether.agents.behavior import actions_of

    block = StatsBlock(block_path, list(actions_of(type(spec.behavior))), create=True)
    os.environ[METRICS_FILE_ENV] = str(block_path)
    served = daemon_metrics(spec, launcher, block, options)
    served.open()
    return served, block


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
