"""Regression tests for bugs in the core found while writing the docs."""

from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

from tether.serialize import deserialize, serialize


def test_polars_frame_round_trip() -> None:
    # read_ipc lost its memory_map argument in polars 1.x/2.x: deserialize raised.
    df = pl.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']})
    out = deserialize(serialize(df))
    assert isinstance(out, pl.DataFrame)
    assert_frame_equal(out, df)
