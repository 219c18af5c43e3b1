"""np.fft on traced arrays. The transforms are HLO ``custom-call``s to NumPy's own pocketfft
(``custom_call_target="numpy.fft.rfft"``, options as JSON), run as library calls on the host, as
XLA:CPU calls its FFT library: results, dtypes (float32 in, complex64 out), ``n=``/``s=``
padding and cropping, ``axes=`` and ``norm=`` are NumPy's. ``fftshift``/``ifftshift`` compose
from ``np.roll``; ``fftfreq``/``rfftfreq`` are constants unless the spacing is traced."""
from __future__ import annotations

import operator
import types

import numpy as np

from ..ir.custom_calls import fft_options
from . import lax
from .decompositions import traced_submodule_function
from .errors import UserValueError
from .arguments import as_tracer, normalize_axis
from .registry import EXPORTS
from .tracer import Tracer

FFT: dict[str, object] = {}  # name -> traced np.fft function (toolkit.numpy.fft)
_NORMS = (None, "backward", "ortho", "forward")


def _register(name: str):
    return lambda impl: traced_submodule_function(getattr(np.fft, name), impl, name, "fft", FFT)


def _input(a, kind: str) -> Tracer:
    a = as_tracer(a)
    if a.dtype.kind in "biu":
        a = lax.convert(a, np.float64)
    if kind == "r2c" and a.dtype.kind == "c":
        raise TypeError(
            "ufunc 'rfft' not supported for the input types (a complex array): use np.fft.fft"
        )
    return a


def _transform(name: str, kind: str, a, s, axes, norm, out) -> Tracer:
    if out is not None:
        raise UserValueError(f"np.fft.{name}: out= is not supported on traced arrays")
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward","ortho" or "forward".')
    a = _input(a, kind)
    axes = [normalize_axis(operator.index(ax), a.ndim) for ax in axes]
    if s is not None:
        s = [operator.index(v) for v in s]
        if len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
        if any(v < 1 for v in s):
            raise ValueError(f"Invalid number of FFT data points ({min(s)}) specified.")
    sizes = s if s is not None else [a.shape[ax] for ax in axes]
    if kind == "c2r" and s is None and a.shape[axes[-1]] < 2 or any(v < 1 for v in sizes):
        raise ValueError(
            f"Invalid number of FFT data points ({min(sizes) if sizes else 0}) specified."
        )
    # NumPy's complex input, in the matching precision (float16 goes to NumPy as it is: it
    # computes in float32 with a float16 normalisation)
    if kind == "c2c" and a.dtype.kind == "f" and a.dtype != np.float16:
        a = lax.convert(a, np.complex64 if a.dtype == np.float32 else np.complex128)
    if kind == "c2r" and a.dtype.kind == "f" and a.dtype != np.float16:
        a = lax.convert(a, np.complex64 if a.dtype == np.float32 else np.complex128)
    return lax.custom_call(f"numpy.fft.{name}", [a], fft_options(name, s, axes, norm))[0]


def _one_dim(name: str, kind: str):
    @_register(name)
    def transform(a, n=None, axis=-1, norm=None, out=None):
        return _transform(name, kind, a, None if n is None else [n], [axis], norm, out)
    return transform


def _two_dim(name: str, kind: str):
    @_register(name)
    def transform(a, s=None, axes=(-2, -1), norm=None, out=None):
        return _transform(name, kind, a, s, list(axes), norm, out)
    return transform


def _n_dim(name: str, kind: str):
    @_register(name)
    def transform(a, s=None, axes=None, norm=None, out=None):
        ndim = as_tracer(a).ndim
        if axes is None:
            axes = list(range(ndim)) if s is None else list(range(ndim - len(s), ndim))
        return _transform(name, kind, a, s, list(axes), norm, out)
    return transform


for _name, _kind in (
    ("fft", "c2c"),
    ("ifft", "c2c"),
    ("rfft", "r2c"),
    ("irfft", "c2r"),
    ("hfft", "c2r"),
    ("ihfft", "r2c"),
):
    _one_dim(_name, _kind)
for _name, _kind in (("fft2", "c2c"), ("ifft2", "c2c"), ("rfft2", "r2c"), ("irfft2", "c2r")):
    _two_dim(_name, _kind)
for _name, _kind in (("fftn", "c2c"), ("ifftn", "c2c"), ("rfftn", "r2c"), ("irfftn", "c2r")):
    _n_dim(_name, _kind)


def _shift(x, axes, sign: int):
    x = as_tracer(x)
    axes = (
        list(range(x.ndim)) if axes is None else ([axes] if isinstance(axes, int) else list(axes))
    )
    shifts = [sign * (x.shape[normalize_axis(ax, x.ndim)] // 2) for ax in axes]
    return EXPORTS["roll"](x, shifts, axes)


@_register("fftshift")
def fftshift(x, axes=None):
    return _shift(x, axes, 1)


@_register("ifftshift")
def ifftshift(x, axes=None):
    return _shift(x, axes, -1)


def _freq(n, d, real: bool):
    n = operator.index(n)
    base = np.fft.rfftfreq(n, 1.0) if real else np.fft.fftfreq(n, 1.0)
    if not isinstance(d, Tracer):
        return np.fft.rfftfreq(n, d) if real else np.fft.fftfreq(n, d)
    values = lax.lift(d.trace, base * 1.0, np.float64, weak=False)
    return values / d


def fftfreq(n, d=1.0, device=None):
    return _freq(n, d, real=False)


def rfftfreq(n, d=1.0, device=None):
    return _freq(n, d, real=True)


FFT["fftfreq"], FFT["rfftfreq"] = fftfreq, rfftfreq
namespace = types.SimpleNamespace(**FFT)

__all__ = ["FFT", "namespace"]
