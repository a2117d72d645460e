"""``python -m tether.node``: the same commands as ``tether node``."""

from __future__ import annotations

from tether.node.cli import node

if __name__ == '__main__':
    node(prog_name='tether node')
