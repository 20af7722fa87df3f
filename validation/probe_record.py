"""The record a probe under validation/results/profile-*/ writes: its rows with the device, torch, the date and
the command that made them, as JSON under $OUT (the device tool brings $OUT back).  torch is imported inside."""
from __future__ import annotations

import json
import os
import time

__all__ = ["write"]


def write(name: str, rows: list, command: str, **extra) -> str:
    """Write $OUT/<name> (default /tmp) and return its path: device, torch, date, command, `extra`, rows."""
    import torch

    path = os.path.join(os.environ.get("OUT", "/tmp"), name)
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
              "command": command, **extra, "rows": rows}
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    return path
