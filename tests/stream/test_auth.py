"""tether.stream.auth's errors about unverified input stay short."""

from __future__ import annotations

import secrets

import pytest

from tether.exceptions import EventAuthenticationError
from tether.stream.auth import StreamKey, Verifier


def test_a_malformed_auth_object_is_shown_cut_short() -> None:
    padding = secrets.token_hex(5000)  # 10,000 characters the message must not carry
    auth = {'producer': padding, 'topic': 't', 'seq': -1, 'extra': [padding] * 50}
    with pytest.raises(EventAuthenticationError, match='malformed "auth" object') as info:
        Verifier(StreamKey(secrets.token_hex(16))).check(auth, {'t'})
    message = str(info.value)
    assert len(message) < 200
    assert padding not in message
    assert padding[:12] in message  # enough of it to recognize the object
