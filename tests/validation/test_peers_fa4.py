"""FlashAttention-4 as an optional peer (validation/peers.py): skipped with its reason where it cannot run, and
called in its own layout where it can.  No torch or GPU: a stand-in torch and flash_attn.cute."""
from __future__ import annotations

import random
import sys
import types

import pytest

from iomodel.peers import PEERS as MODEL_PEERS
from validation import peers


class FakeTensor:
    """Dimensions that transpose(i, j) swaps, as a torch tensor's view would."""

    def __init__(self, dims):
        self.dims = tuple(dims)

    def transpose(self, i, j):
        d = list(self.dims)
        d[i], d[j] = d[j], d[i]
        return FakeTensor(d)


def fake_torch(available=True, capability=(9, 0)):
    cuda = types.SimpleNamespace(is_available=lambda: available, get_device_capability=lambda: capability)
    return types.SimpleNamespace(__version__="0.0", cuda=cuda)


def test_fa4_is_a_peer_of_the_harness_and_the_model_predicts_none_for_it():
    assert peers.FA4 in MODEL_PEERS
    from iomodel.peers import peer_prediction
    assert peer_prediction(peers.FA4, "h100-sxm", {"d": 128}) is None


@pytest.mark.parametrize("torch_, why", [(fake_torch(available=False), "no CUDA device"),
                                          (fake_torch(capability=(8, 0)), "this device is sm_80")])
def test_fa4_skipped_off_its_gpus(torch_, why):
    run, reason = peers._fa4_runner(torch_)
    assert run is None and why in reason


def test_fa4_skipped_where_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", None)   # import flash_attn raises ImportError
    monkeypatch.setitem(sys.modules, "flash_attn.cute", None)
    run, reason = peers._fa4_runner(fake_torch())
    assert run is None and "flash-attn-4" in reason


def test_fa4_called_in_its_layout_and_handed_back_in_ours(monkeypatch):
    calls = []

    def flash_attn_func(q, k, v, causal=False, window_size=(None, None), softcap=0.0):
        calls.append((q.dims, k.dims, v.dims, causal))
        windows.append((window_size, softcap))
        return FakeTensor(q.dims), "lse"

    windows = []

    cute = types.ModuleType("flash_attn.cute")
    cute.flash_attn_func = flash_attn_func
    monkeypatch.setitem(sys.modules, "flash_attn", types.ModuleType("flash_attn"))
    monkeypatch.setitem(sys.modules, "flash_attn.cute", cute)
    run, reason = peers._fa4_runner(fake_torch(capability=(9, 0)))
    assert reason is None and "flash-attn-4" in run.version
    B, H, H_kv, N, d = (random.randint(1, 64) for _ in range(5))
    causal = random.random() < 0.5
    out = run(FakeTensor((B, H, N, d)), FakeTensor((B, H_kv, N + 1, d)), FakeTensor((B, H_kv, N + 1, d)), causal)
    assert calls == [((B, N, H, d), (B, N + 1, H_kv, d), (B, N + 1, H_kv, d), causal)]
    assert out.dims == (B, H, N, d)
    # a window side below 0 is None for FlashAttention-4 (it reads -1 as a bound); ALiBi it refuses
    left = random.randint(0, 4096)
    run(FakeTensor((B, H, N, d)), FakeTensor((B, H_kv, N, d)), FakeTensor((B, H_kv, N, d)), True,
        window_size=(left, 0), softcap=30.0)
    run(FakeTensor((B, H, N, d)), FakeTensor((B, H_kv, N, d)), FakeTensor((B, H_kv, N, d)), True, window_size=(-1, 0))
    assert windows[1:] == [((left, 0), 30.0), ((None, 0), 0.0)]
    with pytest.raises(ValueError, match="ALiBi"):
        run(FakeTensor((B, H, N, d)), FakeTensor((B, H, N, d)), FakeTensor((B, H, N, d)), True, alibi_slopes=object())


def test_which_peers_take_which_features():
    plain = {"causal": True}
    assert all(peers.peer_takes(p, plain) for p in MODEL_PEERS)
    window = {"causal": True, "window_left": random.randint(0, 8192), "window_right": 0}
    softcap = {"causal": False, "softcap": random.uniform(1, 50)}
    for s in (window, softcap, {**window, **softcap}):
        assert [p for p in MODEL_PEERS if peers.peer_takes(p, s)] == [peers.FA4]
    assert not any(peers.peer_takes(p, {**window, "alibi": True}) for p in MODEL_PEERS)
