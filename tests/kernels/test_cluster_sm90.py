"""CPU checks of the wgmma forward's cluster build (A/B knob SM90_CLUSTER, FwdTraits::kCluster): the launcher's rule
for a cluster's size and its refusals, and an nvcc build in which only the plain kernel takes a cluster of two CTAs,
every kernel without spills.  The build skips when nvcc is not on PATH; the GPU's checks are
test_gpu_cluster_sm90.py."""
import re
import shutil
import subprocess

import pytest

from iomodel.families.flash_sm90 import Sm90Config
from kernels import codegen, compile, flash_sm90, reports

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
CFG = Sm90Config(128, 176, 2, 128, 2)


def test_a_cluster_pairs_the_plain_walks_tiles_only():
    size = flash_sm90._cluster_size
    assert size((), True, 32, CFG) == 1 and size((flash_sm90.NO_SPLIT,), True, 31, CFG) == 1
    assert size((flash_sm90.CLUSTER,), True, 32, CFG) == 2
    assert size((flash_sm90.CLUSTER, flash_sm90.NO_SPLIT), True, 2, CFG) == 2
    with pytest.raises(ValueError, match="even number of 128-row tiles, not 9"):
        size((flash_sm90.CLUSTER,), True, 9, CFG)
    with pytest.raises(ValueError, match="fixed walk"):   # causal, varlen, windows, modifiers, DYNAMIC_FULL
        size((flash_sm90.CLUSTER,), False, 32, CFG)


def _shape(N_q, N_k=None, d=128, causal=False):
    return {"B": 2, "H": 8, "H_kv": 8, "N_q": N_q, "N_k": N_k or N_q, "d": d, "causal": causal}


def test_the_launcher_pairs_the_plain_kernels_long_tiles_by_default():
    from kernels.sm90_schedule import CLUSTER_MIN_HEAD_DIM, CLUSTER_MIN_KEYS, pairs_tiles, schedule
    from kernels.window import Window

    def defines(s, block_m=128, **kw):
        cfg = Sm90Config(block_m, 128, 2, s["d"], block_m // 64)
        return schedule(s, block_m, 132, 50 << 20, 2, config=cfg, **kw).defines

    assert CLUSTER_MIN_KEYS == 4096
    assert defines(_shape(4096)) == (flash_sm90.CLUSTER,)            # 32 tiles a head, 4096 keys
    assert defines(_shape(256, 16384)) == (flash_sm90.CLUSTER,)      # two tiles pair, N_q != N_k
    assert defines(_shape(16384, d=64), 192) == (flash_sm90.CLUSTER,)   # 86 tiles of 192 rows
    assert defines(_shape(32768, d=64), 192) == ()                   # 171: the last tile has no partner
    assert defines(_shape(4096, 4095)) == ()                         # tiles too short to gain
    assert CLUSTER_MIN_HEAD_DIM == 64
    assert defines(_shape(4096, d=32), 192) == ()                     # d = 32: the pair waits more than it saves
    assert defines(_shape(4096, causal=True)) == ()
    assert defines(_shape(4096), varlen=True) == ()
    assert defines(_shape(4096), modified=True) == ()
    assert defines(_shape(4096), window=Window(1024, 1024)) == ()
    # an A/B run's defines, or a grid of one CTA a tile, keep the plain kernel
    assert defines(_shape(4096), defines=()) == () and defines(_shape(4096), persistent=False) == ()
    assert schedule(_shape(4096), 128, 132, 50 << 20, 2).defines == ()   # no config given: not asked
    assert pairs_tiles(_shape(8192), CFG) and not pairs_tiles(_shape(8192 - 128), CFG)
    assert not pairs_tiles(_shape(8192, d=256), Sm90Config(128, 80, 2, 256, 2))   # its cluster build spills


@needs_nvcc
@pytest.mark.slow
def test_only_the_plain_kernel_takes_a_cluster_and_nothing_spills(tmp_path):
    plain = [Sm90Config(192, 128, 2, 64, 3), CFG, Sm90Config(128, 128, 2, 128, 2)]
    variants = [(c, "bf16", False) for c in plain] + [(CFG, "bf16", True)]
    source = codegen.sm90_unit(variants)
    _, log = compile.run_nvcc(source, "sm_90a", tmp_path, "cluster", ("-Xptxas", "-v", f"-D{flash_sm90.CLUSTER}"))
    ptxas = reports.parse_ptxas(log)
    assert all(ptxas[codegen.sm90_kernel(*v)]["spill_stores"] == 0 for v in variants), ptxas
    (tmp_path / "cluster.cu").write_text(source)
    ptx = subprocess.run(["nvcc", compile.STD, "-ptx", compile.gencode("sm_90a"), f"-I{compile.CSRC}",
                          f"-D{flash_sm90.CLUSTER}", str(tmp_path / "cluster.cu"), "-o", "-"],
                         capture_output=True, text=True, check=True).stdout
    entries = re.split(r"\.entry ", ptx)[1:]
    clustered = {e.split("(")[0] for e in entries if ".reqnctapercluster 2, 1, 1" in e.split("{")[0]}
    assert clustered == {codegen.sm90_kernel(c, "bf16", False) for c in plain}
    assert "multicast::cluster" in ptx


@needs_nvcc
@pytest.mark.slow
def test_the_switch_leaves_every_other_kernel_as_it_was(tmp_path):
    """SM90_CLUSTER changes only the plain kernels: the causal, varlen, window and modifier kernels' PTX is the same
    with and without it."""
    others = [(CFG, "bf16", True),                                            # causal
              (Sm90Config(128, 80, 2, 256, 2), "bf16", True),                   # the lpt walk's
              (Sm90Config(192, 128, 2, 64, 3), "fp16", False, True),            # varlen
              (Sm90Config(128, 128, 2, 128, 2), "bf16", True, False, True),     # a window
              (CFG, "bf16", False, False, False, 3)]                            # softcap and ALiBi
    (tmp_path / "others.cu").write_text(codegen.sm90_unit(others))

    def ptx(*flags):
        return subprocess.run(["nvcc", compile.STD, "-ptx", compile.gencode("sm_90a"), f"-I{compile.CSRC}", *flags,
                               str(tmp_path / "others.cu"), "-o", "-"], capture_output=True, text=True,
                              check=True).stdout

    assert ptx(f"-D{flash_sm90.CLUSTER}") == ptx()
