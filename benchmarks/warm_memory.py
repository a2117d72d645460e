"""Touch (then free) a few GiB of memory before benchmarking: ``warm_memory.py [GIB]``.

On a freshly booted VM whose memory the host backs lazily (this machine is a Firecracker
VM), the first use of a region of guest memory is slow: allocating and filling 100 MB of
never-used memory measured 0.3-0.8 s against ~12 ms once that memory had been used
(huge-page allocations, which NumPy and tether make for large buffers, always take fresh
regions). Touching a few GiB once makes later runs measure the software, not the VM's
first-touch cost. It applies equally to tether and the peer. Default: 3 GiB.
"""

from __future__ import annotations

import sys
import time

import numpy as np


def main() -> None:
    gib = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    chunk = 256 * 2**20
    t0 = time.perf_counter()
    held = []
    for _ in range(int(gib * 2**30 // chunk)):
        buf = np.empty(chunk, dtype=np.uint8)
        buf[::4096] = 1
        held.append(buf)
    del held
    print(f'warmed {gib:g} GiB of memory in {time.perf_counter() - t0:.1f} s', file=sys.stderr)


if __name__ == '__main__':
    main()
