"""tether._extras: an optional dependency that is missing says what needs it and which
extra installs it."""

from __future__ import annotations

import pytest

from tether._extras import import_extra


def test_an_installed_module_is_returned() -> None:
    import json

    assert import_extra('json', 'nothing needs json', 'none') is json


def test_a_missing_module_names_its_user_and_extra() -> None:
    with pytest.raises(ImportError) as info:
        import_extra('tether_no_such_module', 'the X shims need x-py', 'x')
    assert str(info.value) == 'the X shims need x-py: pip install "tether[x]"'
    assert isinstance(info.value.__cause__, ImportError)
