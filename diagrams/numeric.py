"""Numeric meaning of the library's elementwise maps: a value and one derivative per input.

Each entry is a dict of `Map` keyword arguments, `fn` and `grads` (module-level functions, so two maps
built alike compare and hash alike): `Map("exp", (s, mx), out, **EXP_SUB)`. Every function takes the
map's inputs in order, as numpy arrays broadcast against each other; `grads[i]` returns d out / d input i.
Scales that the formulas name but the diagram does not size (attention's `scale`) are 1 here: fold them
into an input (Q) to evaluate a scaled diagram.
"""
from __future__ import annotations

import numpy as np

GELU_C = float(np.sqrt(2.0 / np.pi))   # the tanh form: 0.5 x (1 + tanh(c (x + 0.044715 x^3)))
GELU_A = 0.044715


def exp_sub(x, m):
    return np.exp(x - m)


def _neg_exp_sub(x, m):
    return -np.exp(x - m)


def div(e, s):
    return e / s


def _inv_second(e, s):
    return 1.0 / s


def _neg_div_sq(e, s):
    return -e / (s * s)


def log_add(s, m):
    return np.log(s) + m


def _inv_first(s, m):
    return 1.0 / s


def max_log(m, s):
    return m + np.log(s)


def _inv_second_only(m, s):
    return 1.0 / s


def _one(*xs):
    return np.ones(np.broadcast(*xs).shape)


def _minus_one(*xs):
    return -_one(*xs)


def tanh(x):
    return np.tanh(x)


def _tanh_grad(x):
    return 1.0 - np.tanh(x) ** 2


def sub(a, b):
    return a - b


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + GELU_A * x ** 3)))


def gelu_grad(x):
    t = np.tanh(GELU_C * (x + GELU_A * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_A * x * x)


def square(x):
    return x * x


def _twice(x):
    return 2.0 * x


def softmax_grad(p, dp, d):
    """dS = P (dP - D): the derivative of softmax applied to the incoming gradient dP, D = rowsum(dP P)."""
    return p * (dp - d)


def _dp_minus_d(p, dp, d):
    return dp - d


def _p(p, dp, d):
    return p


def _minus_p(p, dp, d):
    return -p


def identity(x):
    return x


def zero(x):
    return np.zeros(np.shape(x))


def add(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


def add_grads(n: int) -> tuple:
    return (_one,) * n


def max_grad(g, x, y):
    """The gradient of a max reduction, routed to the points equal to the maximum."""
    return g * (x == y)


def logsumexp_backward(g, x, lse):
    """The incoming gradient g of log-sum-exp, taken back to its input: g exp(x - lse)."""
    return g * np.exp(x - lse)


EXP_SUB = {"fn": exp_sub, "grads": (exp_sub, _neg_exp_sub)}           # exp(x - max)
DIV = {"fn": div, "grads": (_inv_second, _neg_div_sq)}                   # e / sum
LOG_ADD = {"fn": log_add, "grads": (_inv_first, _one)}                   # log(sum) + max
MAX_LOG = {"fn": max_log, "grads": (_one, _inv_second_only)}             # max + log(sum)
SUB = {"fn": sub, "grads": (_one, _minus_one)}                           # lse - target
TANH = {"fn": tanh, "grads": (_tanh_grad,)}                               # softcap: cap * tanh(s / cap), cap 1
GELU = {"fn": gelu, "grads": (gelu_grad,)}
SQUARE = {"fn": square, "grads": (_twice,)}
SOFTMAX_GRAD = {"fn": softmax_grad, "grads": (_dp_minus_d, _p, _minus_p)}  # p (dp - D)
IDENTITY = {"fn": identity, "grads": (_one,)}
ZERO = {"fn": zero, "grads": (zero,)}                                    # a buffer zeroed beside a read
