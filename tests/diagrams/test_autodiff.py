"""Differentiation of diagrams (issue 15): the derived backward diagram, run by the numeric evaluator, against
central finite differences of the forward (and torch.autograd when torch imports)."""
import numpy as np
import pytest
import sympy as sp

from diagrams import library, numeric
from diagrams.algorithms import _mlp_arrays, cross_entropy_loss
from diagrams.autodiff import backward
from diagrams.core import Array, DiagramError, Map, Reduce, axis, product
from diagrams.diagram import Diagram
from diagrams.evaluate import evaluate
from iomodel.derive import derive

SEED = 20261124


def _map_chain(a="a", b="b"):
    """Y = gelu(exp(X)) * W * X: exp, then GeLU, then a product with a broadcast factor; X reaches Y twice."""
    A, B = axis("a", a), axis("b", b)
    X, W = Array("X", (A, B), "fp32"), Array("W", (B,), "fp32")
    E, G, Y = Array("E", (A, B), "fp32"), Array("G", (A, B), "fp32"), Array("Y", (A, B), "fp32")
    ops = (Map("exp", (X,), E, formula="exp(x)", fn=np.exp, grads=(np.exp,)),
           Map("gelu", (E,), G, formula="gelu", **numeric.GELU),
           product("scale", (G, W, X), Y))
    return Diagram("map-chain", ops, ("Y",))


def _max_times_sum():
    """Z[n] = max_m X[n, m] * sum_m X[n, m]: plain reductions (not a composite)."""
    n, m = axis("n"), axis("m")
    X = Array("X", (n, m), "fp32")
    mx, sm, Z = Array("mx", (n,), "fp32"), Array("sm", (n,), "fp32"), Array("Z", (n,), "fp32")
    return Diagram("max-sum", (Reduce("max_m", (X,), mx, axis_name="m", combine="max"),
                               Reduce("sum_m", (X,), sm, axis_name="m"), product("z", (mx, sm), Z)), ("Z",))


def _causal():
    att = library.attention()
    return att.mask("n", "m", att.axes()["m"] - att.axes()["n"])


def _attention_sizes(rng, gqa=False):
    n = int(rng.integers(2, 5))
    sizes = {"B": int(rng.integers(1, 3)), "N": n, "M": n + int(rng.integers(0, 3)), "d": int(rng.integers(2, 5))}
    if gqa:
        return sizes | {"Hk": 2, "g": int(rng.integers(2, 4))}
    return sizes | {"H": int(rng.integers(1, 3))}


CASES = {
    "matmul": (library.matmul, lambda r: {k: int(r.integers(2, 6)) for k in "abc"}),
    "softmax": (library.softmax, lambda r: {"n": int(r.integers(2, 5)), "m": int(r.integers(2, 7))}),
    "map-chain": (_map_chain, lambda r: {"a": int(r.integers(2, 5)), "b": int(r.integers(2, 5))}),
    "max-sum": (_max_times_sum, lambda r: {"n": int(r.integers(2, 5)), "m": int(r.integers(2, 6))}),
    "attention": (library.attention, _attention_sizes),
    "causal": (_causal, _attention_sizes),
    "gqa": (lambda: library.attention(kv_heads="Hk"), lambda r: _attention_sizes(r, gqa=True)),
    "online-lse": (lambda: library.attention().online_softmax(lse=True), _attention_sizes),
    "cross-entropy": (cross_entropy_loss, lambda r: {k: int(r.integers(2, 5)) for k in ("T", "D", "V")}),
    "mlp": (lambda: Diagram("mlp", _mlp_arrays("T", "D", "F", "bf16"), ("Y",)),
            lambda r: {k: int(r.integers(2, 5)) for k in ("T", "D", "F")}),
}


def _shape(x: Array, sizes: dict) -> tuple[int, ...]:
    return tuple(int(sp.sympify(a.size).subs({s: sizes[s.name] for s in a.size.free_symbols})) for a in x.axes)


def _problem(name: str):
    """The diagram, its sizes, random inputs and random output weights dY (fresh sizes, fixed seed)."""
    build, sizes_of = CASES[name]
    rng = np.random.default_rng([SEED, len(name), sum(map(ord, name))])
    d, sizes = build(), sizes_of(rng)
    arrays = d.arrays()
    inputs = {x.name: rng.normal(size=_shape(x, sizes)) for x in d.inputs()}
    weights = {o: rng.normal(size=_shape(arrays[o], sizes)) for o in d.outputs}
    return d, sizes, inputs, weights


def _loss(d, sizes, inputs, weights) -> float:
    out = evaluate(d, inputs, sizes)
    return sum(float(np.sum(out[o] * w)) for o, w in weights.items())


def _finite_differences(d, sizes, inputs, weights, name, h=1e-5) -> np.ndarray:
    val, grad = inputs[name], np.zeros_like(inputs[name])
    for i in np.ndindex(val.shape):
        moved = val.copy()
        moved[i] += h
        up = _loss(d, sizes, {**inputs, name: moved}, weights)
        moved[i] -= 2 * h
        grad[i] = (up - _loss(d, sizes, {**inputs, name: moved}, weights)) / (2 * h)
    return grad


def _gradients(d, sizes, inputs, weights) -> dict[str, np.ndarray]:
    back = backward(d)
    assert set(back.outputs) == {f"d{x}" for x in inputs}
    assert {x.name for x in back.inputs()} <= set(inputs) | {f"d{o}" for o in weights}
    return evaluate(back, inputs | {f"d{o}": w for o, w in weights.items()}, sizes)


def _rel(a, b) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


@pytest.mark.parametrize("name", list(CASES))
def test_backward_matches_finite_differences(name):
    d, sizes, inputs, weights = _problem(name)
    got = _gradients(d, sizes, inputs, weights)
    for x in inputs:
        fd = _finite_differences(d, sizes, inputs, weights, x)
        assert got[f"d{x}"].shape == inputs[x].shape
        assert np.max(np.abs(fd)) > 1e-8, f"{name}: the check of d{x} is vacuous"
        assert _rel(got[f"d{x}"], fd) < 1e-6, f"{name}: d{x}"


def _torch_forward(name, torch, t):
    if name in ("attention", "causal", "gqa"):
        q, k, v = t["Q"], t["K"], t["V"]
        sub = "bkgnd,bkmd->bkgnm" if name == "gqa" else "bhnd,bhmd->bhnm"
        s = torch.einsum(sub, q, k)
        if name == "causal":
            n, m = s.shape[-2:]
            live = torch.arange(m)[None, :] <= torch.arange(n)[:, None] + (m - n)
            s = s.masked_fill(~live, float("-inf"))
        p = torch.softmax(s, -1)
        return {"O": torch.einsum("bkgnm,bkmd->bkgnd" if name == "gqa" else "bhnm,bhmd->bhnd", p, v)}
    if name == "matmul":
        return {"C": t["A"] @ t["B"]}
    if name == "softmax":
        return {"P": torch.softmax(t["S"], -1)}
    if name == "map-chain":
        e = torch.exp(t["X"])
        return {"Y": torch.nn.functional.gelu(e, approximate="tanh") * t["W"] * t["X"]}
    return None


@pytest.mark.parametrize("name", ["matmul", "softmax", "map-chain", "attention", "causal", "gqa"])
def test_backward_matches_torch_autograd(name):
    torch = pytest.importorskip("torch")
    d, sizes, inputs, weights = _problem(name)
    leaves = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in inputs.items()}
    out = _torch_forward(name, torch, leaves)
    loss = sum((out[o] * torch.tensor(w, dtype=torch.float64)).sum() for o, w in weights.items())
    loss.backward()
    got = _gradients(d, sizes, inputs, weights)
    for x, leaf in leaves.items():
        assert _rel(got[f"d{x}"], leaf.grad.numpy()) < 1e-10, f"{name}: d{x}"


def test_attention_backward_ops_and_flops():
    """softmax(Q K^T) V: recompute S and P, then dV = P^T dO, dP = dO V^T, D = rowsum(dP P), dS = P (dP - D),
    dQ = dS K, dK = dS^T Q: five contractions, 2.5x the forward's matrix FLOPs."""
    att = library.attention()
    back = backward(att)
    kinds = {op.output.name: op.kind for op in back.ops}
    assert back.outputs == ("dQ", "dK", "dV") and {x.name for x in back.inputs()} == {"Q", "K", "V", "dO"}
    assert kinds == {"S": "contraction", "P_max": "reduce", "P_exp": "map", "P_sum": "reduce", "P": "map",
                     "dV": "contraction", "dP": "contraction", "dP_P": "product", "D_P": "reduce", "dS": "map",
                     "dQ": "contraction", "dK": "contraction"}
    B, H, N, M, d = (sp.Symbol(s, positive=True, integer=True) for s in ("B", "H", "N", "M", "d"))
    fwd = derive(att.group("b", 1).group("h", 1)).kernels[0].flops
    bwd = derive(backward(att, dtype="bf16").group("b", 1).group("h", 1)).kernels[0].flops
    assert sp.simplify(fwd["tensor"] - 4 * B * H * N * M * d) == 0
    assert sp.simplify(bwd["tensor"] - 10 * B * H * N * M * d) == 0          # 2.5x
    assert sp.simplify(bwd["fp32"] - 8 * B * H * N * M) == 0 and sp.simplify(bwd["exp"] - B * H * N * M) == 0


def test_backward_derives_after_relabeling():
    """The backward diagrams are valid diagrams that the derivation takes, relabeled like any other."""
    for name in ("attention", "causal", "gqa", "mlp", "cross-entropy"):
        back = backward(CASES[name][0]())
        for a in ("b", "h", "hk", "g"):
            if a in back.axes():
                back = back.group(a, 1)
        costs = derive(back).kernels[0]
        assert costs.flops and all(t.nbytes != 0 for t in costs.transfers)
    causal = backward(_causal()).group("b", 1).group("h", 1).group("m", "Bc").stream("n", "Br", "smem")
    assert causal.masks == _causal().masks and derive(causal).kernels[0].flops


def test_gradient_of_an_output_that_is_also_consumed_is_summed():
    att = library.attention()
    both = Diagram("attention-p", att.ops, ("O", "P"))
    d, sizes = both, {"B": 1, "H": 2, "N": 3, "M": 4, "d": 3}
    rng = np.random.default_rng(SEED)
    arrays = d.arrays()
    inputs = {x.name: rng.normal(size=_shape(x, sizes)) for x in d.inputs()}
    weights = {o: rng.normal(size=_shape(arrays[o], sizes)) for o in d.outputs}
    back = backward(d)
    adds = [op for op in back.ops if op.name.endswith(":add")]
    assert len(adds) == 1 and {x.name for x in adds[0].inputs} >= {"dP"}
    got = _gradients(d, sizes, inputs, weights)
    for x in inputs:
        assert _rel(got[f"d{x}"], _finite_differences(d, sizes, inputs, weights, x)) < 1e-6


def test_wrt_restricts_the_gradients():
    back = backward(library.attention(), wrt="V")
    assert back.outputs == ("dV",) and {op.output.name for op in back.ops} == {"S", "P_max", "P_exp", "P_sum", "P", "dV"}
    assert backward(library.attention(), wrt=("K", "Q")).outputs == ("dK", "dQ")


def test_errors_name_the_op():
    n = axis("n")
    X, Y = Array("X", (n,), "fp32"), Array("Y", (n,), "fp32")
    opaque = Diagram("opaque", (Map("f", (X,), Y, formula="f(x)"),), ("Y",))
    with pytest.raises(DiagramError, match=r"^map f \(f\(x\)\): no numeric definition"):
        evaluate(opaque, {"X": np.ones(3)})
    with pytest.raises(DiagramError, match=r"^backward: map f \(f\(x\)\) declares no derivative"):
        backward(opaque)
    valued = Diagram("valued", (Map("f", (X,), Y, formula="f(x)", fn=np.sin),), ("Y",))
    with pytest.raises(DiagramError, match="declares no derivative"):
        backward(valued)
    with pytest.raises(DiagramError, match="is relabeled"):
        backward(library.flash_attention())
    with pytest.raises(DiagramError, match="Z not an input"):
        backward(library.matmul(), wrt="Z")
    with pytest.raises(DiagramError, match="no value for input B"):
        evaluate(library.matmul(), {"A": np.ones((2, 3))})
    with pytest.raises(DiagramError, match="input B has shape"):
        evaluate(library.matmul(), {"A": np.ones((2, 3)), "B": np.ones((2, 3))})
    wide = Diagram("wide", (Map("spread", (X,), Array("Z", (n, axis("m")), "fp32"), **numeric.IDENTITY),), ("Z",))
    with pytest.raises(DiagramError, match=r"no size for m \(axis m\)"):
        evaluate(wide, {"X": np.ones(3)})
    assert evaluate(wide, {"X": np.arange(3.0)}, {"m": 2})["Z"].tolist() == [[0, 0], [1, 1], [2, 2]]
    with pytest.raises(DiagramError, match="grads for 1 inputs"):
        Map("f", (X,), Y, fn=np.sin, grads=(np.cos, np.cos))
    with pytest.raises(DiagramError, match="already has an array dX"):
        backward(Diagram("clash", (Map("f", (X,), Array("dX", (n,), "fp32"), fn=np.sin, grads=(np.cos,)),), ("dX",)))


def test_library_maps_declare_their_meaning():
    """Every map the library builds for attention, the MLP, cross-entropy and split's combine has a value and a
    derivative; the rsqrt of RMSNorm (its formula needs D and eps) has none."""
    diagrams = [library.attention(), cross_entropy_loss(), library.rmsnorm_then_matmul(),
                Diagram("mlp", _mlp_arrays("T", "D", "F", "bf16"), ("Y",))]
    diagrams += list(library.attention_split_kv().kernels) + list(library.attention_backward().kernels)
    maps = {op.name: op for d in diagrams for op in d.ops if isinstance(op, Map)}
    missing = sorted(name for name, op in maps.items() if op.grads is None and op.kind != "product")
    assert missing == ["rsqrt"]
