"""Which CUDA the installed pieces speak, and the one-line error when they disagree.

The kernels compile with NVRTC and load through the driver.  A cubin from NVRTC of a newer CUDA major than
the driver supports does not load ("unsupported PTX version" or "no kernel image"), and the fix is the
install: the extra of the driver's CUDA (``iomodel[gpu-cu12]`` for a CUDA 12 driver, ``iomodel[gpu-cu13]``
for CUDA 13; ``nvidia-smi`` prints the driver's "CUDA Version").  ``check`` says so before a kernel loads.
"""
from __future__ import annotations

__all__ = ["EXTRAS", "extra_for", "mismatch", "check"]

#: the driver's CUDA major -> the extra that installs the matching NVRTC and CuPy
EXTRAS = {12: "gpu-cu12", 13: "gpu-cu13"}


def extra_for(cuda_major: int) -> str:
    """The extra for a driver of CUDA `cuda_major` (the newest known for a newer driver)."""
    if cuda_major in EXTRAS:
        return EXTRAS[cuda_major]
    return EXTRAS[max(EXTRAS)] if cuda_major > max(EXTRAS) else EXTRAS[min(EXTRAS)]


def _version(v: int) -> str:
    """CUDA's integer version (12040) as text (12.4)."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def mismatch(nvrtc: tuple[int, int], driver: int) -> str:
    """"" when NVRTC (major, minor) can build for a driver of CUDA version `driver` (e.g. 12040), else the
    one line that says what to install."""
    if nvrtc[0] * 1000 + nvrtc[1] * 10 <= driver or nvrtc[0] <= driver // 1000:
        return ""
    major = driver // 1000
    return (f"NVRTC is CUDA {nvrtc[0]}.{nvrtc[1]} but the driver supports CUDA {_version(driver)}: install the "
            f"matching extra, pip install 'iomodel[{extra_for(major)}]' (or set IOMODEL_LIBNVRTC to a CUDA {major} "
            f"libnvrtc), or a driver for CUDA {nvrtc[0]}.")


_checked = False


def check() -> None:
    """Raise RuntimeError (one line) when the process's NVRTC is newer than its driver; checked once."""
    global _checked
    if _checked:
        return
    from . import compile

    driver = compile.driver_cuda_version()
    why = mismatch(compile.nvrtc_version(), driver) if driver else ""
    if why:
        raise RuntimeError(why)
    _checked = True
