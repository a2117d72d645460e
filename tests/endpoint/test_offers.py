"""The peering offer and answer records, and the path both sides derive from them."""

from __future__ import annotations

from typing import Any

import pytest

from tether.endpoint._offers import (
    PathAnswer,
    PathOffer,
    decode_answer,
    decode_offer,
    encode,
)
from tether.endpoint._paths import choose_path
from tether.exceptions import PeeringError, ProtocolError

OFFER = PathOffer(
    'aa' * 16,
    'bb' * 32,
    'CERT',
    ['10.0.0.1:7000'],
    'cone',
    ['direct', 'punched', 'relayed'],
    ['1.2.3.4', 5000],
    None,
)
ANSWER = PathAnswer('CERT-B', [], 'cone', ['5.6.7.8', 6000], ['5.6.7.8', 6001])


def test_offer_and_answer_round_trip() -> None:
    assert decode_offer(encode(OFFER)) == OFFER
    assert decode_answer(encode(ANSWER)) == ANSWER
    assert 'tcp' not in encode(OFFER)  # None is left out


@pytest.mark.parametrize(
    ('header', 'match'),
    [
        ({**encode(OFFER), 'secret': 'not hex'}, "'secret' must be hexadecimal"),
        ({**encode(OFFER), 'udp': ['1.2.3.4']}, r"'udp' must be \[ip, port\]"),
        ({**encode(OFFER), 'paths': 'direct'}, "'paths' must be list"),
        ({**encode(OFFER), 'direct': [1]}, "'direct' must be a list of strings"),
        ({k: v for k, v in encode(OFFER).items() if k != 'cert'}, "without the field 'cert'"),
    ],
)
def test_malformed_offers_are_protocol_errors(header: dict[str, Any], match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        decode_offer(header)


def test_the_path_both_sides_choose() -> None:
    paths = ['direct', 'punched', 'relayed']
    assert choose_path(paths, OFFER, ANSWER._replace(direct=['h:1'])) == 'direct'
    assert choose_path(paths, OFFER, ANSWER) == 'punched'
    assert choose_path(paths, OFFER, ANSWER._replace(nat='symmetric')) == 'relayed'
    with pytest.raises(PeeringError, match='no allowed path'):
        choose_path(['punched'], OFFER, ANSWER._replace(udp=None))
