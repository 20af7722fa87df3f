"""CPU checks of the Hopper backward (``flash_bwd_sm90``): kernel names and text, the SMEM formula against
the kernel's own constant, and an nvcc build of every shipped variant for sm_90a (no spills, no ptxas
warning of serialised wgmma or injected fences, HGMMA in the SASS, no local memory).  The build tests
skip when nvcc is not on PATH."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from iomodel.families.flash_bwd_sm90 import SHIPPED, FlashBwdSm90Config
from kernels import compile, flash_bwd_sm90, reports

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
H100_MAX_SMEM = 232448  # opt-in limit per block (227 KiB)
VARIANTS = [(c, dt, ca, det) for c in SHIPPED for dt in ("bf16", "fp16") for ca in (False, True) for det in (False, True)]


def test_kernel_names_and_text():
    cfg = FlashBwdSm90Config(64, 128, 2, 128, 2)
    dot, main, convert = flash_bwd_sm90.kernel_names(cfg, "bf16", True, True)
    assert dot == "iom::flash_bwd_dot_kernel<iom::bf16, 128>"
    assert main == "flash_bwd_sm90_m64n128s2d128c2_bf16_causal_det"
    assert convert == "iom::flash_bwd_convert_kernel<iom::bf16, 128, 64, sm90::DqSlices<64, 2, 128>>"
    unit = flash_bwd_sm90.unit([(cfg, "bf16", True, True), (cfg, "fp16", False, False)])
    assert "sm90::BwdTraits<64, 128, 2, 128, 2, true, true, true>" in unit
    assert "sm90::BwdTraits<64, 128, 2, 128, 2, false, false, false>" in unit
    assert unit.count('extern "C" __global__') == 2


def test_shipped_fit_and_split():
    for cfg in SHIPPED:
        assert not cfg.problems(), cfg
        assert cfg.smem_bytes(2) <= H100_MAX_SMEM, cfg
        assert cfg.dq_slice % 64 == 0 and cfg.block_n == 64 * cfg.consumers


@needs_nvcc
@pytest.mark.slow
def test_smem_formula_matches_kernel(tmp_path):
    lines = ['#include "flash_bwd_sm90.cuh"']
    for i, c in enumerate(SHIPPED):
        for det in ("false", "true"):
            lines.append(f"static_assert(sm90::BwdTraits<{c.block_m}, {c.block_n}, {c.stages}, {c.head_dim}, "
                         f"{c.consumers}, true, false, {det}>::kSmemBytes == {c.smem_bytes(2)}, \"cfg {i}\");")
    cu = tmp_path / "smem.cu"
    cu.write_text("\n".join(lines) + "\n")
    res = subprocess.run(["nvcc", "-cubin", compile.gencode("sm_90a"), compile.STD, f"-I{compile.CSRC}", str(cu),
                          "-o", str(tmp_path / "smem.cubin")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("bwd_sm90")
    cubin, log = compile.run_nvcc(flash_bwd_sm90.offline_unit(VARIANTS), "sm_90a", out, "bwd_sm90",
                                  ("-Xptxas", "-v"))
    return str(cubin), log


@needs_nvcc
@pytest.mark.slow
def test_every_shipped_variant_builds_clean(build):
    cubin, log = build
    ptxas = reports.parse_ptxas(log)
    mains = {flash_bwd_sm90.kernel_names(*v)[1] for v in VARIANTS}
    assert mains <= set(ptxas), sorted(mains - set(ptxas))
    for name in mains:
        r = ptxas[name]
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack"] == 0, (name, r)
        assert r["static_smem"] == 0, (name, r)
    # C7508: setmaxnreg ignored; C7509-C7520: wgmma serialised, fences or arrives injected
    warned = [m.group(0) for m in reports._PTXAS_WARN.finditer(log)]
    assert not warned, warned
    sass = reports.sass_counts(cubin)
    if sass is not None:
        for name in mains:
            assert sass[name]["HGMMA"] > 0, name
            assert sass[name]["LDL"] == 0 and sass[name]["STL"] == 0, (name, sass[name])


def test_a_causal_section_is_about_one_wave_of_ctas():
    base = {"B": 4, "H": 16, "H_kv": 16, "N_q": 4096, "N_k": 4096, "d": 128}
    assert flash_bwd_sm90.groups_per_section({**base, "causal": False}, 128, 132) == 1
    for n, want in ((2048, 8), (4096, 4), (8192, 2), (16384, 1), (65536, 1), (4000, 4)):
        shape = {**base, "N_q": n, "N_k": n, "causal": True}
        assert flash_bwd_sm90.groups_per_section(shape, 128, 132) == want, n
    tiny = {**base, "N_q": 128, "N_k": 128, "causal": True}
    assert flash_bwd_sm90.groups_per_section(tiny, 128, 132) == 64        # every group: less than a wave
    assert flash_bwd_sm90.groups_per_section({**tiny, "B": 1, "H_kv": 2}, 128, 132) == 2


def _host_program_lines(tmp_path, name: str, program: str) -> list[list[str]]:
    """Build a host program over the kernel's header with nvcc, run it: its non-empty lines, split."""
    src, exe = tmp_path / f"{name}.cu", tmp_path / name
    src.write_text(program)
    res = subprocess.run(["nvcc", compile.STD, f"-I{compile.CSRC}", str(src), "-o", str(exe)], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.split("\n") if line]


_ORDER_PROGRAM = r"""
#include "flash_bwd_sm90.cuh"
#include <cstdio>
template <bool DET>
void dump(int num_n, int H_kv, int groups, int sec) {
    typedef sm90::BwdTraits<64, 128, 2, 128, 2, true, true, DET> T;
    printf("%d %d %d %d %d", int(DET), num_n, H_kv, groups, sec);
    for (int id = 0; id < num_n * groups; ++id) {
        const sm90::BwdUnit u = sm90::unit_of<T>(id, num_n, H_kv, groups, sec);
        printf(" %d,%d", u.n, u.b * H_kv + u.h_kv);
    }
    printf("\n");
}
int main() {
    const int cases[][4] = {{5, 3, 6, 4}, {5, 3, 6, 1}, {5, 3, 6, 6}, {7, 2, 2, 3}, {1, 4, 8, 3}, {9, 1, 5, 2}};
    for (const auto& c : cases) {
        dump<false>(c[0], c[1], c[2], c[3]);
        dump<true>(c[0], c[1], c[2], c[3]);
    }
}
"""


@needs_nvcc
def test_launch_order_covers_every_unit_once_in_its_schedule(tmp_path):
    """unit_of, compiled for the host: each (key tile, group) exactly once; with one group a section the
    old order (a group's key tiles in turn); inside a section the key tiles longest first (from the first;
    the deterministic mode from the last), so a deterministic CTA's dQ adds only wait on key tiles of its
    group that were launched before it."""
    cases = _host_program_lines(tmp_path, "order", _ORDER_PROGRAM)
    assert len(cases) == 12
    for fields in cases:
        det, num_n, _h_kv, groups, sec = map(int, fields[:5])
        units = [tuple(map(int, f.split(","))) for f in fields[5:]]
        assert sorted(units) == [(n, g) for n in range(num_n) for g in range(groups)], fields[:5]
        key = [num_n - 1 - n if det else n for n, _ in units]
        sections = [g // sec for _, g in units]
        assert sections == sorted(sections), fields[:5]                    # section after section
        for s in set(sections):
            steps = [k for k, sc in zip(key, sections) if sc == s]
            assert steps == sorted(steps), fields[:5]                       # longest first inside a section
        if sec == 1:
            assert units == [((num_n - 1 - i if det else i), g) for g in range(groups) for i in range(num_n)]
        seen = set()
        for n, g in units:   # deterministic: every later key tile of the group already launched
            if det:
                assert all((m, g) in seen for m in range(n + 1, num_n)), fields[:5]
            seen.add((n, g))


_SPAN_PROGRAM = r"""
#include "flash_bwd_sm90.cuh"
#include <cstdio>
int main() {
    // units, whole, pieces, group, m_first, num_m
    const int cases[][6] = {{10, 6, 3, 1, 0, 8}, {10, 6, 5, 2, 0, 7}, {7, 0, 4, 3, 2, 9}, {5, 4, 8, 1, 0, 32},
                            {6, 6, 1, 2, 0, 5}, {9, 7, 2, 4, 3, 4}};
    for (const auto& c : cases) {
        const int units = c[0], whole = c[1], pieces = c[2];
        printf("%d %d %d %d %d %d", c[0], c[1], c[2], c[3], c[4], c[5]);
        for (int id = 0; id < whole + (units - whole) * pieces; ++id) {
            const sm90::BwdSpan s = sm90::span_of(id, whole, pieces, c[3], c[4], c[5]);
            printf(" %d,%d,%d,%d,%d,%d", sm90::unit_id(id, whole, pieces), s.hi0, s.m0, s.hi1, s.m1, s.slot);
        }
        printf("\n");
    }
}
"""


@needs_nvcc
def test_the_tail_split_streams_every_query_tile_of_a_unit_once(tmp_path):
    """span_of and unit_id, compiled for the host: the units before `whole` whole; every later unit's
    pieces are consecutive CTAs whose (query head, query tile) spans partition the unit's, in order; each
    piece's slot is its index among the pieces (combine_pieces reads slot / pieces as the unit)."""
    lines = _host_program_lines(tmp_path, "span", _SPAN_PROGRAM)
    assert len(lines) == 6
    for fields in lines:
        units, whole, pieces, group, m_first, num_m = map(int, fields[:6])
        ctas = [tuple(map(int, f.split(","))) for f in fields[6:]]
        covered: dict[int, list] = {}
        for i, (unit, hi0, m0, hi1, m1, slot) in enumerate(ctas):
            tiles = [(hi, m) for hi in range(hi0, hi1 + 1)
                     for m in range(m0 if hi == hi0 else m_first, m1 if hi == hi1 else num_m)]
            covered.setdefault(unit, []).extend(tiles)
            if i < whole or pieces == 1:
                assert unit == i and slot == -1, fields[:6]
            else:
                assert slot == i - whole and unit == whole + slot // pieces, fields[:6]
        want = [(hi, m) for hi in range(group) for m in range(m_first, num_m)]
        assert sorted(covered) == list(range(units)), fields[:6]
        assert all(covered[u] == want for u in covered), fields[:6]          # once each, in stream order


def test_the_tail_split_fills_the_last_wave():
    """tail_split: no split under a causal mask or when the units fill whole waves; otherwise the last
    wave's units in pieces whose rounds end sooner than one more whole unit would."""
    from iomodel.perf import tail_pieces

    cfg = {c.head_dim: c for c in SHIPPED}
    base = {"B": 1, "H": 16, "H_kv": 16, "N_q": 16384, "N_k": 16384, "d": 128}
    assert flash_bwd_sm90.tail_split({**base, "causal": True}, cfg[128], 132, 16384) == (2048, 1)
    assert flash_bwd_sm90.tail_split({**base, "causal": False}, cfg[128], 128, 16384) == (2048, 1)
    whole, pieces = flash_bwd_sm90.tail_split({**base, "causal": False}, cfg[128], 132, 16384)
    assert whole == 2048 - 2048 % 132 and 1 < pieces <= 8
    rounds = -(-(2048 - whole) * pieces // 132)
    assert rounds / pieces < 1.0
    assert flash_bwd_sm90.grid_size({**base, "causal": False}, cfg[128], 132, 16384) == whole + 68 * pieces
    # pieces of fewer than four query tiles are not made (N = 512: 8 tiles of 64 rows, at most 2 pieces)
    short = {**base, "N_q": 512, "N_k": 512, "B": 33, "causal": False}
    assert flash_bwd_sm90.tail_split(short, cfg[128], 132, 512)[1] <= 2
    assert tail_pieces(2048, 132, 256, 2.0, 1) == (1, 16.0, 16.0)


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("switch", ("IOM_BWD90_TRACE", "IOM_BWD90_CTA_TIMES"))
def test_the_profiling_switches_build(tmp_path, switch):
    """The backward's profiling switches (docs/kernels_bwd_sm90.md) still compile."""
    variants = [(SHIPPED[-1], "bf16", True, False)]
    _, log = compile.run_nvcc(flash_bwd_sm90.offline_unit(variants), "sm_90a", tmp_path, "prof",
                              ("-Xptxas", "-v", f"-D{switch}"))
    assert flash_bwd_sm90.kernel_names(*variants[0])[1] in reports.parse_ptxas(log)
