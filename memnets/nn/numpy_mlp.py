"""A head's MLP (:func:`memnets.nn.heads.mlp`) evaluated in numpy, for the few rows of a query.

The importance head scores a search's 15 candidates per query. In torch that is a dozen ops
(modules called through ``nn.Module.__call__``, ``torch.cat``, GELU, sigmoid, the tensor made
of the text features, the no-grad and thread-count switches), each paying torch's per-op dispatch:
about 0.18 ms per query at 100k memories, more than the SQLite read of the candidates
(docs/history.md, "The query path around the encoder"). The same arithmetic in numpy is two
matrix products and a GELU.

:class:`NumpyMLP` copies the weights of an ``nn.Sequential`` of Linear / GELU / Dropout layers in
eval mode (dropout is the identity) to float32 arrays (torch's precision; numpy's float32 product
is twice as fast as float64's at this size), or reads them from a head's safetensors file with no
torch at all (:meth:`NumpyMLP.from_state`: a pack's heads served by the core install). GELU is exact, ``x * Phi(x)`` with Phi the
standard normal CDF (torch's default); numpy has no erf, so :func:`normal_cdf` interpolates a
table of :func:`math.erf` made once: on each interval between knots 1/64 apart over [-8, 8], the
cubic that matches Phi and its derivative (the normal density) at both ends (cubic Hermite),
error below 1e-9 (h^4 / 384 times max |Phi''''|), and 0 or 1 beyond, where Phi is within 7e-16
of them. The table of the cubics' coefficients is 32 KiB, so that a query's 960 look-ups stay in
the CPU's nearest caches (a linear table fine enough for the same error, 0.5 MiB, missed them on
most look-ups right after the encoder had run), and it is read with one gather and Horner's rule:
a dozen numpy calls, each of which costs more than its arithmetic at this size. Results agree
with the float32 torch forward within its own rounding (tests/nn/test_heads.py).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

CDF_LIMIT = 8.0  # |x| beyond it: Phi(x) is 0 or 1 within 7e-16
CDF_STEPS = 64  # knots per unit


@lru_cache(maxsize=1)
def _cdf_cubics() -> np.ndarray:
    """[intervals, 4]: per interval of [-CDF_LIMIT, CDF_LIMIT], the coefficients (c0, c1, c2, c3) of the
    cubic c0 + c1 t + c2 t^2 + c3 t^3 in t in [0, 1] that takes Phi's values and slopes at both ends."""
    knots = np.linspace(-CDF_LIMIT, CDF_LIMIT, int(2 * CDF_LIMIT * CDF_STEPS) + 1)
    values = np.array([0.5 * (1.0 + math.erf(x / math.sqrt(2.0))) for x in knots])
    slopes = np.exp(-0.5 * knots**2) / math.sqrt(2.0 * math.pi) / CDF_STEPS  # per unit of t
    p0, p1, m0, m1 = values[:-1], values[1:], slopes[:-1], slopes[1:]
    return np.stack([p0, m0, 3.0 * (p1 - p0) - 2.0 * m0 - m1, 2.0 * (p0 - p1) + m0 + m1], axis=1)


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF of finite ``x`` (any shape) as float64, within 1e-9 (see the module docstring)."""
    cubics = _cdf_cubics()
    # x = CDF_LIMIT falls at the very end of the last interval, not in a next one
    position = (np.clip(np.asarray(x, dtype=np.float64), -CDF_LIMIT, CDF_LIMIT * (1.0 - 1e-15)) + CDF_LIMIT) * CDF_STEPS
    interval = position.astype(np.intp)
    t = position - interval
    c = cubics[interval]
    return ((c[..., 3] * t + c[..., 2]) * t + c[..., 1]) * t + c[..., 0]


def weights_key(net) -> tuple:
    """Which tensors the Linear layers of ``net`` (an ``nn.Sequential``) hold and how often each was changed in
    place (torch's version counter, moved by an optimiser step or ``load_state_dict``): equal keys, equal weights."""
    from torch import nn

    return tuple(
        (id(tensor), tensor._version)
        for layer in net
        if isinstance(layer, nn.Linear)
        for tensor in (layer.weight, layer.bias)
        if tensor is not None
    )


def linear_names(prefix: str, hidden_layers: int) -> list[str]:
    """The state names of the Linear layers of :func:`memnets.nn.heads.mlp` with ``hidden_layers`` hidden
    layers, under ``prefix`` (``"net."``): its blocks are Linear, GELU, Dropout, so Linear ``i`` is module ``3 i``."""
    return [f"{prefix}{3 * i}" for i in range(hidden_layers + 1)]


def mlp_shapes(prefix: str, in_dim: int, hidden_dims) -> dict[str, tuple[int, ...]]:
    """The state shapes of :func:`memnets.nn.heads.mlp` of ``in_dim`` inputs and ``hidden_dims`` widths, one logit out."""
    shapes: dict[str, tuple[int, ...]] = {}
    for name, width in zip(linear_names(prefix, len(hidden_dims)), [*hidden_dims, 1], strict=True):
        shapes |= {f"{name}.weight": (int(width), int(in_dim)), f"{name}.bias": (int(width),)}
        in_dim = width
    return shapes


class NumpyMLP:
    """The eval-mode forward of an MLP of Linear, exact GELU and Dropout layers, one logit out, on float32
    arrays: ``mlp(x [N, in]) -> float64 logits [N]``. ``layers``: ``(weight [in, out], bias [out])`` pairs
    with ``"gelu"`` between them; ``key``: the :func:`weights_key` of the module they were copied from."""

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray] | str], key: tuple = ()) -> None:
        self.layers, self.key = layers, key

    @classmethod
    def of_module(cls, net) -> NumpyMLP:
        """Float32 copies of the weights of ``net``, an ``nn.Sequential`` (dropout: the identity of eval mode)."""
        from torch import nn

        layers: list[tuple[np.ndarray, np.ndarray] | str] = []
        for layer in net:
            if isinstance(layer, nn.Linear):
                weight = layer.weight.detach().cpu().float().numpy().T.copy()
                bias = (
                    layer.bias.detach().cpu().float().numpy().copy()
                    if layer.bias is not None
                    else np.zeros(weight.shape[1], np.float32)
                )
                layers.append((weight, bias))
            elif isinstance(layer, nn.GELU) and layer.approximate == "none":
                layers.append("gelu")
            elif not isinstance(layer, nn.Dropout):  # the identity in eval mode
                raise TypeError(f"NumpyMLP: no numpy form of {layer!r} (Linear, exact GELU and Dropout only)")
        return cls(layers, weights_key(net))

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray], prefix: str, hidden_layers: int) -> NumpyMLP:
        """The MLP of :func:`memnets.nn.heads.mlp` from its saved tensors (``state``: name -> array, as
        ``safetensors.numpy`` reads them; names checked beforehand), with no torch."""
        layers: list[tuple[np.ndarray, np.ndarray] | str] = []
        for name in linear_names(prefix, hidden_layers):
            if layers:
                layers.append("gelu")
            weight = np.asarray(state[f"{name}.weight"], np.float32).T.copy()
            layers.append((weight, np.asarray(state[f"{name}.bias"], np.float32)))
        return cls(layers)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, dtype=np.float32)
        for layer in self.layers:
            if layer == "gelu":
                h = (h * normal_cdf(h)).astype(np.float32)
            else:
                weight, bias = layer
                h = h @ weight + bias
        return h[:, 0].astype(np.float64)


__all__ = ["NumpyMLP", "linear_names", "mlp_shapes", "normal_cdf", "weights_key"]
