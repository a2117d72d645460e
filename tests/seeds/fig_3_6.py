# Figure 3.6 of the dissertation ("Programming the Continuum"), with only the imports
# changed from proxystore to tether. (The figure's serializer refers to the global `model`
# and reads the buffer without rewinding it; both are kept as printed.)
import io
from typing import Any

import torch

from tether.serialize import serialize
from tether.store import Store


def serialize_torch_model(obj: Any) -> bytes:
    if isinstance(obj, torch.nn.Module):
        buf = io.BytesIO()
        torch.save(model, buf)
        return buf.read()
    # Fallback for unsupported types
    return serialize(obj)


model = torch.nn.Module()

store = Store(serializer=serialize_torch_model)
proxy = store.proxy(model)
