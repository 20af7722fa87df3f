"""Code generation: the C++ text that names and instantiates each kernel variant.

* the mma.sync templates of ``csrc/flash_fwd_sm80.cuh`` and ``csrc/unfused.cuh``: template-ids such as
  ``iom::flash_fwd_kernel<iom::bf16, 128, 64, 4, 2, 128, false, false>`` (NVRTC name expressions at run time)
  and explicit-instantiation units (the offline nvcc builds of ``kernels.reports``);
* the Hopper kernel of ``csrc/flash_fwd_sm90.cuh``: one ``extern "C"`` wrapper per (config, dtype,
  causal), so its symbol is its plain name;
* ``csrc/sm90_wgmma.cuh``: one inline-asm wrapper per wgmma shape and type (``python -m kernels.reports
  gen-wgmma`` writes it; tests check the file is in sync).

Pure text: no compiler, no GPU.  The configs are the families' (``iomodel.families``).
"""
from __future__ import annotations

from pathlib import Path

from iomodel.families import flash_sm80 as _flash_sm80
from iomodel.families import flash_sm90 as _flash_sm90
from iomodel.families import matmul_sm80 as _matmul_sm80

__all__ = ["DTYPES", "CSRC", "flash_sm80_kernel", "flash_sm80_merge_kernel", "matmul_kernel", "softmax_kernel", "unfused_kernels",
           "sm80_unit", "sm90_kernel", "sm90_instance", "sm90_splits", "sm90_unit", "wgmma_header_text",
           "write_wgmma_header", "WGMMA_HEADER"]

CSRC = Path(__file__).resolve().parent / "csrc"
DTYPES = ("bf16", "fp16")
WGMMA_HEADER = "sm90_wgmma.cuh"
# wgmma N values the generated header has wrappers for: every S = Q K^T chunk width (SS) and every
# head dim (RS, O += P V)
WGMMA_SS_N = tuple(range(16, 257, 16))
WGMMA_RS_N = _flash_sm90.HEAD_DIMS
# both operands MN-major from SMEM (tnspA = tnspB = 1): the backward's dQ = dS K, whose dS^T and K tiles
# are stored with the keys (the contracted axis) as rows; a warpgroup's dQ slice is 64 or 128 head dims
WGMMA_SST_N = (64, 128)

# Parameter lists of the sm80 kernels, for explicit instantiation (they must match the headers).
_FLASH_PARAMS = ("const {T}*, const {T}*, const {T}*, {T}*, float*, "
                 + "long long, " * 12 + "int, int, int, int, float, float, const int*, const int*, int, int, "
                 + "float, const float*, long long, int, int, float*, float*")
_MATMUL_PARAMS = ("const {T}*, const {T}*, void*, int, int, int, int, "
                  + "long long, " * 9 + "int, int, float")
_SOFTMAX_PARAMS = "const float*, {T}*, long long, int, int, int, int, int"
_SM90_INCLUDE = '#include "flash_fwd_sm90.cuh"\n'


def _check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return dtype


def _b(flag: bool) -> str:
    return "true" if flag else "false"


# ------------------------------------------------------------------ mma.sync templates (sm80 and newer)
def flash_sm80_kernel(cfg, dtype: str, causal: bool, varlen: bool = False, local: bool = False, mods: int = 0,
                      split: bool = False) -> str:
    """Template-id of ``flash_fwd_kernel`` for a FlashConfig, e.g.
    ``iom::flash_fwd_kernel<iom::bf16, 128, 64, 4, 2, 128, false, false>`` (the last: packed varlen; a
    ninth, ``true``, for a sliding window, whose upper bound is the causal flag's; a tenth, the score
    modifiers' bits (``kernels.score_mods``), when there are any; an eleventh, ``true``, for the tail split's
    grid, SPLIT; a twelfth, ``true``, for Q held in registers, ``cfg.q_regs``)."""
    if getattr(cfg, "q_regs", 0):
        tail = f", {_b(local)}, {int(mods)}, {_b(split)}, true"
    elif split:
        tail = f", {_b(local)}, {int(mods)}, true"
    else:
        tail = f", {_b(local)}, {int(mods)}" if mods else (", true" if local else "")
    return (f"iom::flash_fwd_kernel<iom::{_check_dtype(dtype)}, {cfg.block_m}, {cfg.block_n}, {cfg.warps}, "
            f"{cfg.stages}, {cfg.head_dim}, {_b(causal)}, {_b(varlen)}{tail}>")


def flash_sm80_merge_kernel(cfg, dtype: str) -> str:
    """Template-id of ``flash_fwd_merge_kernel``, the tail split's merge of a FlashConfig's pieces."""
    return f"iom::flash_fwd_merge_kernel<iom::{_check_dtype(dtype)}, {cfg.block_m}, {cfg.head_dim}>"


def matmul_kernel(cfg, dtype: str, b_kmajor: bool, out_f32: bool) -> str:
    """Template-id of ``matmul_kernel`` for a MatmulConfig and operand layout."""
    return (f"iom::matmul_kernel<iom::{_check_dtype(dtype)}, {cfg.block_m}, {cfg.block_n}, {cfg.block_k}, "
            f"{cfg.warps}, {cfg.stages}, {_b(b_kmajor)}, {_b(out_f32)}>")


def softmax_kernel(dtype: str) -> str:
    return f"iom::softmax_rows_kernel<iom::{_check_dtype(dtype)}>"


def unfused_kernels(cfg, dtype: str) -> tuple[str, str, str]:
    """(S = scale * Q K^T with fp32 S, row softmax, O = P V): the unfused attention's three kernels."""
    return matmul_kernel(cfg, dtype, True, True), softmax_kernel(dtype), matmul_kernel(cfg, dtype, False, False)


def _flash_variants(configs):
    for cfg in configs:
        for dtype in DTYPES:
            for causal in (False, True):
                yield cfg, dtype, causal


def _matmul_variants(configs):
    for cfg in configs:
        for dtype in DTYPES:
            yield cfg, dtype, True, True     # S = scale * Q K^T  (fp32 out)
            yield cfg, dtype, False, False   # O = P V            (elem out)


def sm80_unit(flash_configs=None, matmul_configs=None) -> str:
    """A .cu translation unit that explicitly instantiates every variant (both dtypes; flash causal and
    not; both matmul layouts; the softmax) of the given configs (None: the shipped ones)."""
    flash = _flash_sm80.SHIPPED if flash_configs is None else flash_configs
    matmul = _matmul_sm80.SHIPPED if matmul_configs is None else matmul_configs
    lines = ['#include "flash_fwd_sm80.cuh"', '#include "unfused.cuh"', ""]
    for cfg, dtype, causal in _flash_variants(flash):
        params = _FLASH_PARAMS.format(T=f"iom::{dtype}")
        lines.append(f"template __global__ void {flash_sm80_kernel(cfg, dtype, causal)}({params});")
    for cfg, dtype, kmajor, f32 in _matmul_variants(matmul):
        params = _MATMUL_PARAMS.format(T=f"iom::{dtype}")
        lines.append(f"template __global__ void {matmul_kernel(cfg, dtype, kmajor, f32)}({params});")
    for dtype in DTYPES:
        lines.append(f"template __global__ void {softmax_kernel(dtype)}({_SOFTMAX_PARAMS.format(T=f'iom::{dtype}')});")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ the Hopper kernel (sm_90a)
def sm90_kernel(cfg, dtype: str, causal: bool, varlen: bool = False, local: bool = False, mods: int = 0) -> str:
    """The extern "C" name of one variant, e.g. ``flash_fwd_sm90_m128n128s2d128c2_bf16_full`` (``_varlen``:
    packed variable-length batches; ``_local``: a sliding window; ``_mods<bits>``: score modifiers)."""
    return (f"flash_fwd_sm90_{cfg.name}_{_check_dtype(dtype)}_{'causal' if causal else 'full'}"
            f"{'_varlen' if varlen else ''}{'_local' if local else ''}{f'_mods{int(mods)}' if mods else ''}")


def sm90_splits(causal: bool, varlen: bool = False, local: bool = False, mods: int = 0) -> bool:
    """Whether a variant takes the tail split's arguments: the plain kernel without a mask, window, modifier or
    varlen batch (``FwdTraits::kSplit``; every tile of it streams the same chunks)."""
    return not (causal or varlen or local or mods)


def sm90_instance(cfg, dtype: str, causal: bool, varlen: bool = False, local: bool = False, mods: int = 0) -> str:
    """C++ text instantiating one extern "C" kernel for (cfg, dtype, causal, varlen, local, mods); a window
    variant takes win_left and win_right after total_q, a variant with score modifiers softcap_mul,
    alibi and alibi_sb after those (``kernels.score_mods``), the plain one (:func:`sm90_splits`) the tail
    split's whole, pieces, part and count."""
    name = sm90_kernel(cfg, dtype, causal, varlen, local, mods)
    tail = f", {_b(local)}, {int(mods)}" if mods else (", true" if local else "")
    traits = (f"sm90::FwdTraits<{cfg.block_m}, {cfg.block_n}, {cfg.stages}, {cfg.head_dim}, "
              f"{cfg.consumers}, {_b(dtype == 'bf16')}, {_b(causal)}, {_b(varlen)}{tail}>")
    window_params, window_args = (", int win_left, int win_right", ", win_left, win_right") if local else ("", "")
    if mods:
        window_params += ", float softcap_mul, const float* alibi, long long alibi_sb"
        window_args = (window_args or ", 0, 0") + ", softcap_mul, alibi, alibi_sb"
    attrs = ""
    if sm90_splits(causal, varlen, local, mods):
        window_params += ", int whole, int pieces, float* part, int* count"
        window_args += ", 0, 0, 0.f, nullptr, 0, whole, pieces, part, count"
        attrs = " SM90_PLAIN_ATTRS"   # (the header's: a cluster of two CTAs under SM90_CLUSTER, else nothing)
    return (
        f"typedef {traits} T_{name};\n"
        f'extern "C" __global__ void __launch_bounds__(T_{name}::kThreads, 1){attrs}\n'
        f"{name}(const __grid_constant__ TmaDesc tmQ, const __grid_constant__ TmaDesc tmK,\n"
        f"    const __grid_constant__ TmaDesc tmV, u16* O, float* L, int B, int H, int H_kv, int N_q,\n"
        f"    int N_k, float scale_log2, int sec, int* counter, const int* order, const int* cu_q, const int* cu_k,"
        f" int total_q"
        f"{window_params}) {{\n"
        f"  sm90::flash_fwd_sm90<T_{name}>(tmQ, tmK, tmV, O, L, B, H, H_kv, N_q, N_k, scale_log2, sec,\n"
        f"                                counter, order, cu_q, cu_k, total_q{window_args});\n"
        f"}}\n"
    )


def sm90_unit(variants) -> str:
    """A translation unit of (config, dtype, causal[, varlen[, local[, mods]]]) variants (the kernel header
    included, not inlined)."""
    return _SM90_INCLUDE + "".join(sm90_instance(*v) for v in variants)


# ------------------------------------------------------------------ csrc/sm90_wgmma.cuh
def _wgmma_preamble() -> list[str]:
    return [
        f"// {WGMMA_HEADER} -- GENERATED by `python -m kernels.reports gen-wgmma` (kernels/codegen.py:",
        "// wgmma_header_text).  Do not edit by hand.",
        "//",
        "// wgmma.mma_async m64nNk16 with f32 accumulators for bf16 and f16 inputs:",
        "//   wgmma_ss<N, BF16>(d, desc_a, desc_b, scale_d)      A and B from SMEM, both K-major",
        "//   wgmma_rs<N, BF16>(d, a0..a3, desc_b, scale_d)      A from registers, B MN-major (tnspB=1)",
        "//   wgmma_rsk<N, BF16>(d, a0..a3, desc_b, scale_d)     A from registers, B K-major (tnspB=0)",
        "//   wgmma_sst<N, BF16>(d, desc_a, desc_b, scale_d)     A and B from SMEM, both MN-major (tnspA=tnspB=1)",
        "// scale_d = 0 overwrites the accumulator (D = A*B), 1 accumulates (D += A*B).",
        "#pragma once",
        '#include "sm90_common.cuh"',
        "",
        "namespace sm90 {",
        "",
    ]


def _wgmma_operands(kind: str, nreg: int) -> dict:
    """Operand numbering of one wrapper's asm: after the nreg accumulators come A (SS: one descriptor;
    RS: four registers), then B's descriptor and scale_d."""
    if kind in ("ss", "sst"):
        return dict(a_ops=f"%{nreg}", ib=nreg + 1, isc=nreg + 2, tail="p, 1, 1, 1, 1" if kind == "sst" else "p, 1, 1, 0, 0",
                    sig="u64 desc_a, u64 desc_b, int scale_d", ins='"l"(desc_a), "l"(desc_b), "r"(scale_d)')
    return dict(a_ops="{" + ", ".join(f"%{nreg + j}" for j in range(4)) + "}", ib=nreg + 4, isc=nreg + 5,
                tail="p, 1, 1, 1" if kind == "rs" else "p, 1, 1, 0",   # tnspB: V MN-major, K K-major
                sig="u32 a0, u32 a1, u32 a2, u32 a3, u64 desc_b, int scale_d",
                ins='"r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(scale_d)')


def _wgmma_wrapper(kind: str, n: int, ty: str) -> list[str]:
    """One ``wgmma_{ss,sst,rs,rsk}_n{N}_{bf16,f16}`` inline-asm function."""
    nreg = n // 2
    op = _wgmma_operands(kind, nreg)
    dregs = ", ".join(f"%{i}" for i in range(nreg))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nreg))
    return [
        f"__device__ __forceinline__ void wgmma_{kind}_n{n}_{ty}(float (&d)[{nreg}], {op['sig']}) {{",
        "    asm volatile(",
        '        "{\\n.reg .pred p;\\n"',
        f'        "setp.ne.b32 p, %{op["isc"]}, 0;\\n"',
        f'        "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} "',
        f'        "{{{dregs}}}, "',
        f'        "{op["a_ops"]}, %{op["ib"]}, {op["tail"]};\\n}}\\n"',
        f"        : {outs}",
        f"        : {op['ins']});",
        "}",
    ]


def _wgmma_dispatch(kind: str, ns) -> list[str]:
    """The ``wgmma_{ss,sst,rs,rsk}<N, BF16>`` template that picks the wrapper for N at compile time."""
    out = ["template <int N, bool BF16>"]
    if kind in ("ss", "sst"):
        out.append(f"__device__ __forceinline__ void wgmma_{kind}(float (&d)[N / 2], u64 desc_a, u64 desc_b, int scale_d) {{")
        call = "(d, desc_a, desc_b, scale_d)"
    else:
        head = f"__device__ __forceinline__ void wgmma_{kind}("
        out.append(f"{head}float (&d)[N / 2], u32 a0, u32 a1, u32 a2, u32 a3, u64 desc_b,")
        out.append(f"{' ' * len(head)}int scale_d) {{")
        call = "(d, a0, a1, a2, a3, desc_b, scale_d)"
    for i, n in enumerate(ns):
        out.append(f"    {'if constexpr' if i == 0 else '} else if constexpr'} (N == {n}) {{")
        out.append(f"        if constexpr (BF16) wgmma_{kind}_n{n}_bf16{call};")
        out.append(f"        else wgmma_{kind}_n{n}_f16{call};")
    out += ["    } else {", f'        static_assert(N < 0, "wgmma_{kind}: unsupported N");', "    }", "}", ""]
    return out


def wgmma_header_text(ss_ns=WGMMA_SS_N, rs_ns=WGMMA_RS_N, sst_ns=WGMMA_SST_N, rsk_ns=WGMMA_SS_N) -> str:
    """Text of csrc/sm90_wgmma.cuh: the wrappers for every N of each kind, then the four dispatchers (rsk: S = Q K^T
    with Q's fragments in registers, the forward's SM90_Q_REGS_MAX, so every N of the S product)."""
    out = _wgmma_preamble()
    kinds = (("ss", ss_ns), ("rs", rs_ns), ("sst", sst_ns), ("rsk", rsk_ns))
    for kind, ns in kinds:
        for n in ns:
            for ty in ("bf16", "f16"):
                out += _wgmma_wrapper(kind, n, ty)
        out.append("")
    for kind, ns in kinds:
        out += _wgmma_dispatch(kind, ns)
    out.append("}  // namespace sm90")
    return "\n".join(out) + "\n"


def write_wgmma_header() -> Path:
    path = CSRC / WGMMA_HEADER
    path.write_text(wgmma_header_text())
    return path
