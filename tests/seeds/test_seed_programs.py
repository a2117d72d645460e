"""Seed programs that live as scripts (run exactly as printed, imports changed)."""

from __future__ import annotations

import runpy
from pathlib import Path

HERE = Path(__file__).parent


def test_seed_figure_3_6_runs() -> None:
    import torch

    from tether.proxy import is_resolved
    from tether.store import get_key

    ns = runpy.run_path(str(HERE / 'fig_3_6.py'), run_name='__main__')
    proxy = ns['proxy']
    store = ns['store']
    assert isinstance(proxy, torch.nn.Module)
    assert is_resolved(proxy)
    assert store.exists(get_key(proxy))
    assert store.config().serializer == '__main__.serialize_torch_model'
