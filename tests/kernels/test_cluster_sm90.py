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
