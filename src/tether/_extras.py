"""Optional dependencies: import one, or say what needs it and which extra installs it.

A kit module (any tether package may import it): it depends on nothing of tether.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ['import_extra']


def import_extra(module: str, needs: str, extra: str) -> ModuleType:
    """Import and return ``module``.

    Args:
        module: The module's dotted name (``'paho.mqtt.client'``).
        needs: Who needs which package, the start of the error's message (``'the MQTT
            stream shims need paho-mqtt'``).
        extra: The tether extra that installs it (``'mqtt'``).

    Raises:
        ImportError: ``module`` is not installed (the message says what needs it and
            ``pip install "tether[<extra>]"``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f'{needs}: pip install "tether[{extra}]"') from e
