"""``python -m tether.endpoint NAME [HOME]``: run an endpoint in the foreground (daemon body)."""

from __future__ import annotations

import sys

from tether.endpoint._daemon import run_foreground
from tether.exceptions import EndpointError

if __name__ == '__main__':
    try:
        run_foreground(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
    except EndpointError as e:
        # One clear line in the log, which `tether endpoint start` shows.
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
