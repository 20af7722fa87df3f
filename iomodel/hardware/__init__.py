"""GPU hardware facts (datasheet) and measured ceilings (calibration).

Two kinds of numbers live apart on purpose:

* ``iomodel/hardware_data/<key>.toml`` holds what the vendor states: SM count,
  clocks, memory sizes and bandwidths, per-SM limits, unit rates.  Every
  number is a table ``{value, unit, source}``; a rate computed from others says
  ``source = "derived: <formula>"``.
* ``iomodel/calibration/<key>.toml`` holds what a run of ``python -m validation``
  measured on a real device: GEMM rate, copy bandwidth, per-clock unit rates.
  Any of them may be missing.

``resolve_gpu`` / ``load_spec`` turn a name or spec file into a frozen :class:`GpuSpec`;
``load_calibration`` / ``write_calibration`` read and write calibration files.
Malformed files raise :class:`HardwareError` with a one-line message that names
the file and the field.

Modules: ``facts`` (one checked ``{value, unit, source}`` number, units),
``gpu_spec`` (the :class:`GpuSpec` dataclass), ``spec_schema`` (the spec file's field
table and its reader), ``spec`` (finding specs by key, alias, path or device name),
``calibration`` (measured ceilings), ``toml_io`` (TOML reading and writing).
"""

from .calibration import (
    CAL_FIELDS,
    CALIBRATION_DIR,
    Calibration,
    calibration_from_dict,
    calibration_to_dict,
    calibration_toml,
    load_calibration,
    write_calibration,
)
from .facts import Fact, HardwareError
from .gpu_spec import GpuSpec, WgmmaShape
from .spec import DATA_DIR, UnknownGpuError, list_specs, load_spec, resolve_gpu, spec_for_device

__all__ = [
    "HardwareError",
    "UnknownGpuError",
    "Fact",
    "WgmmaShape",
    "GpuSpec",
    "Calibration",
    "CAL_FIELDS",
    "load_spec",
    "list_specs",
    "spec_for_device",
    "resolve_gpu",
    "load_calibration",
    "write_calibration",
    "calibration_toml",
    "calibration_from_dict",
    "calibration_to_dict",
    "DATA_DIR",
    "CALIBRATION_DIR",
]
