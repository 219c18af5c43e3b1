"""np.linalg on traced arrays. The factorizations and solves are HLO ``custom-call``s to named
library routines (NumPy's LAPACK-backed np.linalg itself, see ir/custom_calls.py), as XLA
calls LAPACK on the CPU and cuSOLVER on the GPU; norms, matrix powers and products compose from
traced operations. Integer inputs are computed in float64, as np.linalg does."""
from __future__ import annotations

import operator
import types

import numpy as np

from . import lax
from .errors import UnsupportedNumpyError, UserValueError
from .arguments import as_tracer, normalize_axes
from .registry import EXPORTS, FUNCTIONS, has_tracer
from .tracer import Tracer
from .ufuncs import apply_ufunc

LINALG: dict[str, object] = {}  # name -> traced np.linalg function (toolkit.numpy.linalg)


def traced_submodule_function(np_func, impl, public: str, scope: str, registry: dict):
    """``np_func`` (of a NumPy submodule: np.linalg, np.fft) on traced arguments: ``impl``
    inside the op scope ``scope.public``, NumPy's own function otherwise; registered for NumPy's
    ``__array_function__`` dispatch and in ``registry`` (the toolkit.numpy namespace)."""
    def wrapper(*args, **kwargs):
        if not has_tracer(list(args) + list(kwargs.values())):
            return np_func(*args, **kwargs)
        trace = lax.trace_of(
            [a for a in _leaves(list(args) + list(kwargs.values())) if isinstance(a, Tracer)]
        )
        with trace.op_scope(f"{scope}.{public}"):
            return impl(*args, **kwargs)

    wrapper.__name__ = wrapper.__qualname__ = public
    FUNCTIONS[np_func] = wrapper
    registry[public] = wrapper
    return wrapper


def _register(np_func, name=None):
    return lambda impl: traced_submodule_function(
        np_func, impl, name or impl.__name__, "linalg", LINALG
    )


def _leaves(values):
    out, stack = [], list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        else:
            out.append(v)
    return out


def _u(ufunc, *args):
    return apply_ufunc(ufunc, args)


def _float(a) -> Tracer:
    a = as_tracer(a)
    if a.dtype.kind in "biu":
        return lax.convert(a, np.float64)
    return a


def _square(a: Tracer, what: str) -> Tracer:
    if a.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{a.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    if a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
    return a


@_register(np.linalg.inv)
def inv(a):
    return lax.custom_call("numpy.linalg.inv", [_square(_float(a), "inv")])[0]


@_register(np.linalg.solve)
def solve(a, b):
    a = _square(_float(a), "solve")
    b = b if isinstance(b, Tracer) else lax.lift(a.trace, b, weak=False)
    # (np.linalg computes integers as float64; a complex b keeps its imaginary part)
    b = b if b.dtype.kind in "fc" else lax.convert(b, np.float64)
    dtype = np.result_type(a.dtype, b.dtype)
    a, b = lax.convert(a, dtype), lax.convert(b, dtype)
    vector = b.ndim == 1
    if vector:
        b = lax.reshape(b, (b.shape[0], 1))
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = lax.broadcast_to(a, batch + a.shape[-2:])
    b = lax.broadcast_to(b, batch + b.shape[-2:])
    if b.shape[-2] != a.shape[-1]:
        raise UserValueError(
            f"solve: b has {b.shape[-2]} rows for a {a.shape[-1]}x{a.shape[-1]} matrix"
        )
    x = lax.custom_call("numpy.linalg.solve", [a, b])[0]
    return lax.reshape(x, x.shape[:-1]) if vector else x


@_register(np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    a = _square(_float(a), "cholesky")
    if not upper:
        return lax.custom_call("numpy.linalg.cholesky", [a])[0]
    # NumPy's upper factor reads a's upper triangle: U = L^H for L the lower factor of a^H
    # (whose lower triangle is that upper triangle, conjugated)
    lower = lax.custom_call("numpy.linalg.cholesky", [_adjoint(a)])[0]
    return _adjoint(lower)


def _adjoint(x: Tracer) -> Tracer:
    x = EXPORTS["matrix_transpose"](x)
    return apply_ufunc(np.conjugate, (x,)) if x.dtype.kind == "c" else x


@_register(np.linalg.det)
def det(a):
    return lax.custom_call("numpy.linalg.det", [_square(_float(a), "det")])[0]


@_register(np.linalg.slogdet)
def slogdet(a):
    sign, logabsdet = lax.custom_call("numpy.linalg.slogdet", [_square(_float(a), "slogdet")])
    return np.linalg._linalg.SlogdetResult(sign, logabsdet)


@_register(np.linalg.qr)
def qr(a, mode="reduced"):
    a = _float(a)
    if mode not in ("reduced", "complete", "r"):
        raise UnsupportedNumpyError(
            f"np.linalg.qr(mode={mode!r}) is not supported on traced arrays"
        )
    if a.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{a.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    q, r = lax.custom_call("numpy.linalg.qr", [a], "complete" if mode == "complete" else "reduced")
    return r if mode == "r" else np.linalg._linalg.QRResult(q, r)


@_register(np.linalg.eigh)
def eigh(a, UPLO="L"):
    w, v = lax.custom_call("numpy.linalg.eigh", [_square(_float(a), "eigh")], _uplo(UPLO))
    return np.linalg._linalg.EighResult(w, v)


@_register(np.linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):
    return lax.custom_call("numpy.linalg.eigvalsh", [_square(_float(a), "eigvalsh")],
                           _uplo(UPLO))[0]


def _uplo(uplo):
    if uplo not in ("L", "U"):
        raise UserValueError("UPLO argument must be 'L' or 'U'")
    return uplo


@_register(np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    a = _float(a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{a.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    if not compute_uv:
        return svdvals(a)
    u, s, vh = lax.custom_call("numpy.linalg.svd", [a], "full" if full_matrices else "reduced")
    return np.linalg._linalg.SVDResult(u, s, vh)


@_register(np.linalg.svdvals)
def svdvals(x, /):
    a = _float(x)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{a.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    return lax.custom_call("numpy.linalg.svdvals", [a])[0]


@_register(np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=np._NoValue):
    if rcond is not None or rtol is not np._NoValue:
        raise UnsupportedNumpyError(
            "np.linalg.pinv(rcond=, rtol=) is not supported on traced arrays"
        )
    return lax.custom_call("numpy.linalg.pinv", [_float(a)])[0]


@_register(np.linalg.matrix_rank)
def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    a = _float(A)
    if a.ndim < 2:
        return EXPORTS["any"](_u(np.not_equal, a, 0)).astype(np.int64)
    s = svdvals(a)
    if tol is None:
        eps = np.finfo(a.dtype).eps
        r = max(a.shape[-2:]) * eps if rtol is None else rtol
        tol = _u(np.multiply, EXPORTS["max"](s, axis=-1, keepdims=True, initial=0), r)
    else:
        tol = (
            EXPORTS["expand_dims"](tol, -1)
            if isinstance(tol, Tracer)
            else np.asarray(tol)[..., None]
        )
    return EXPORTS["count_nonzero"](_u(np.greater, s, tol), axis=-1)


@_register(np.linalg.cond)
def cond(x, p=None):
    """NumPy's: the ratio of singular values (p None, 2, -2), or norm(x) norm(inv(x)) with the
    inverse taken with errors ignored (a singular matrix: NaNs); a NaN result is inf unless x
    itself holds a NaN."""
    a = _float(x)
    if p not in (None, 2, -2):
        a = _square(as_tracer(a), "cond")
        inverse = lax.custom_call("numpy.linalg.inv_or_nan", [a])[0]
        r = _u(np.multiply, norm(a, p, axis=(-2, -1)), norm(inverse, p, axis=(-2, -1)))
    else:
        s = svdvals(a)
        hi, lo = EXPORTS["max"](s, axis=-1), EXPORTS["min"](s, axis=-1)
        r = _u(np.true_divide, lo, hi) if p == -2 else _u(np.true_divide, hi, lo)
    x_nan = EXPORTS["any"](_u(np.isnan, a), axis=(-2, -1))
    undefined = _u(np.logical_and, _u(np.isnan, r), _u(np.logical_not, x_nan))
    return EXPORTS["where"](undefined, np.array(np.inf, r.dtype), r)


@_register(np.linalg.matrix_power)
def matrix_power(a, n):
    a = _square(as_tracer(a), "matrix_power")
    n = operator.index(n)
    if n == 0:
        return lax.broadcast_to(lax.convert(EXPORTS["eye"](a.shape[-1]), a.dtype), a.shape)
    if n < 0:
        a, n = inv(a), -n
    result, base = None, a
    while n:  # binary exponentiation, as NumPy
        if n & 1:
            result = base if result is None else EXPORTS["matmul"](result, base)
        n >>= 1
        if n:
            base = EXPORTS["matmul"](base, base)
    return result


@_register(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    arrays = list(arrays)
    if len(arrays) < 2:
        raise UserValueError("Expecting at least two arrays.")
    result = arrays[0]
    for a in arrays[1:]:
        result = EXPORTS["dot"](result, a)
    return result


def _vector_norm(x: Tracer, ord, axes, keepdims):
    a = _u(np.absolute, x)
    if ord is None or ord == 2:
        return _u(np.sqrt, EXPORTS["sum"](_u(np.multiply, a, a), axis=axes, keepdims=keepdims))
    if ord == np.inf:
        return EXPORTS["max"](a, axis=axes, keepdims=keepdims)
    if ord == -np.inf:
        return EXPORTS["min"](a, axis=axes, keepdims=keepdims)
    if ord == 0:
        return EXPORTS["sum"](_u(np.not_equal, x, 0), axis=axes, keepdims=keepdims).astype(x.dtype)
    if ord == 1:
        return EXPORTS["sum"](a, axis=axes, keepdims=keepdims)
    if isinstance(ord, str):
        raise UserValueError(f"Invalid norm order '{ord}' for vectors")
    return _u(
        np.power,
        EXPORTS["sum"](_u(np.power, a, float(ord)), axis=axes, keepdims=keepdims),
        1.0 / ord,
    )


def _matrix_norm(x: Tracer, ord, axes, keepdims):
    row, col = axes
    if ord in (None, "fro"):  # (NumPy's (x.conj() * x).real: a^2 + b^2, not |x| |x|)
        squares = _u(np.multiply, x, x) if x.dtype.kind != "c" else \
            EXPORTS["real"](_u(np.multiply, _u(np.conjugate, x), x))
        return _u(np.sqrt, EXPORTS["sum"](squares, axis=axes, keepdims=keepdims))
    if ord in (2, -2, "nuc"):
        moved = EXPORTS["moveaxis"](x, (row, col), (-2, -1))
        s = svdvals(moved)
        # (NumPy's max and sum start from 0: a 0x0 matrix's norm is 0)
        value = (EXPORTS["min"](s, axis=-1) if ord == -2 else
                 {2: EXPORTS["max"], "nuc": EXPORTS["sum"]}[ord](s, axis=-1, initial=0))
        if keepdims:
            for ax in sorted(axes):
                value = EXPORTS["expand_dims"](value, ax)
        return value
    if ord in (1, -1, np.inf, -np.inf):
        summed_axis = row if ord in (1, -1) else col
        other = col if ord in (1, -1) else row
        sums = EXPORTS["sum"](_u(np.absolute, x), axis=summed_axis, keepdims=True)
        value = (EXPORTS["max"](sums, axis=other, keepdims=True, initial=0) if ord in (1, np.inf)
                 else EXPORTS["min"](sums, axis=other, keepdims=True))
        return value if keepdims else EXPORTS["squeeze"](value, axis=axes)
    raise UserValueError("Invalid norm order for matrices.")


@_register(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    x = _float(x)
    if axis is None:
        if ord is None or (ord in ("f", "fro") and x.ndim == 2) or (ord == 2 and x.ndim == 1):
            # NumPy's own path: the square root of the flat array's dot with itself (BLAS's
            # dot, whose sums round as NumPy's do; a complex array's parts each)
            flat = lax.reshape(x, (x.size,))
            parts = [EXPORTS["real"](flat), EXPORTS["imag"](flat)] if x.dtype.kind == "c" \
                else [flat]
            squares = [EXPORTS["dot"](p, p) for p in parts]
            value = _u(np.sqrt, squares[0] if len(squares) == 1 else _u(np.add, *squares))
            return lax.reshape(value, (1,) * x.ndim) if keepdims else value
        axes = tuple(range(x.ndim))
    else:
        axes = normalize_axes(axis, x.ndim)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise UserValueError("Improper number of dimensions to norm.")


@_register(np.linalg.vector_norm)
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    x = _float(x)
    axes = tuple(range(x.ndim)) if axis is None else normalize_axes(axis, x.ndim)
    return _vector_norm(x, ord, axes, keepdims)


@_register(np.linalg.matrix_norm)
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    x = _float(x)
    return _matrix_norm(x, ord, (x.ndim - 2, x.ndim - 1), keepdims)


@_register(np.linalg.trace)
def trace(x, /, *, offset=0, dtype=None):  # the array API's: over the last two axes
    return EXPORTS["trace"](x, offset, -2, -1, dtype)


@_register(np.linalg.diagonal)
def diagonal(x, /, *, offset=0):
    return EXPORTS["diagonal"](x, offset, -2, -1)


@_register(np.linalg.outer, "outer")
def linalg_outer(x1, x2, /):
    """The array API's outer: of 1-d arrays only (np.outer flattens its operands)."""
    x1, x2 = as_tracer(x1), as_tracer(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise UserValueError("Input arrays must be one-dimensional, but they are "
                             f"x1.ndim={x1.ndim} and x2.ndim={x2.ndim}.")
    return EXPORTS["outer"](x1, x2)


@_register(np.linalg.cross, "cross")
def linalg_cross(x1, x2, /, *, axis=-1):
    """The array API's cross: of 3-element vectors only (np.cross takes 2-element ones too)."""
    x1, x2 = as_tracer(x1), as_tracer(x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise UserValueError(
            "Both input arrays must be (arrays of) 3-dimensional vectors, but they are "
            f"{x1.shape[axis]} and {x2.shape[axis]} dimensional instead.")
    return EXPORTS["cross"](x1, x2, axis=axis)


for _name in ("matmul", "tensordot", "vecdot", "matrix_transpose"):
    _np_func = getattr(np.linalg, _name)
    if _np_func not in FUNCTIONS:
        FUNCTIONS[_np_func] = EXPORTS[_name]
    LINALG[_name] = EXPORTS[_name]

namespace = types.SimpleNamespace(**LINALG, LinAlgError=np.linalg.LinAlgError)


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """NumPy's least-squares polynomial fit: the Vandermonde matrix with its columns scaled to
    unit norm, solved by the SVD pseudo-inverse (NumPy's lstsq uses LAPACK's SVD-based gelsd
    with the same cutoff, eps * max(M, N)); the coefficients agree to rounding. NumPy's
    RankWarning for a badly conditioned fit is not issued."""
    if full or cov or rcond is not None:
        raise UnsupportedNumpyError(
            "np.polyfit(full=, cov=, rcond=) is not supported on traced arrays; "
            "the default form (coefficients only, w= allowed) is"
        )
    order = operator.index(deg) + 1
    if order < 1:
        raise UserValueError("expected deg >= 0")
    x, y = _u(np.add, as_tracer(x), 0.0), _u(np.add, as_tracer(y), 0.0)
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.size == 0:
        raise TypeError("expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")
    lhs, rhs = EXPORTS["vander"](x, order), y
    if w is not None:
        w = _u(np.add, as_tracer(w), 0.0)
        if w.ndim != 1 or w.shape[0] != y.shape[0]:
            raise TypeError("expected a 1-d weight vector of the same length as y")
        lhs = _u(np.multiply, lhs, lax.reshape(w, (w.shape[0], 1)))
        rhs = _u(np.multiply, rhs, w if rhs.ndim == 1 else lax.reshape(w, (w.shape[0], 1)))
    scale = _u(np.sqrt, EXPORTS["sum"](_u(np.multiply, lhs, lhs), axis=0))
    lhs = _u(np.true_divide, lhs, scale)
    c = EXPORTS["matmul"](pinv(lhs), rhs)
    return _u(np.true_divide, c, scale if c.ndim == 1 else lax.reshape(scale, (scale.shape[0], 1)))


EXPORTS["polyfit"] = polyfit
FUNCTIONS[np.polyfit] = polyfit
