"""``python -m tether.endpoint NAME [HOME]``: run an endpoint in the foreground (daemon body)."""

from __future__ import annotations

import sys

from tether.endpoint._daemon import run_foreground

if __name__ == '__main__':
    run_foreground(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
