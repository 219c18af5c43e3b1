"""Derivatives of the ``np.linalg`` library calls (``custom-call``s): inv, solve, det and
slogdet, in both modes, with the standard matrix-calculus formulas (the ones JAX uses; det's
through the adjugate, which a singular matrix has too).
Matrices are the last two dimensions; leading dimensions batch. The other routines
(cholesky, qr, eigh, svd, ...) say by name that they are not differentiated yet
(ad_custom_calls)."""
from __future__ import annotations

from . import lax
from .ad_custom_calls import TARGET_RULES
from .ad_rules import add_tangents
from .tracer import Tracer


def _batch(a: Tracer) -> int:
    return a.ndim - 2


def _mm(a: Tracer, b: Tracer) -> Tracer:
    nb = _batch(a)
    return lax.dot_general(a, b, ((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))


def _mT(a: Tracer) -> Tracer:
    perm = list(range(a.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return lax.transpose(a, perm)


def _neg(a: Tracer) -> Tracer:
    return lax.elementwise("negate", a)


def _trace_of_product(a_inv: Tracer, t: Tracer) -> Tracer:
    """trace(a_inv @ t) over the last two dimensions: sum(a_inv^T * t)."""
    return lax.reduce(lax.elementwise("multiply", _mT(a_inv), t), "add", (t.ndim - 2, t.ndim - 1))


def _per_matrix(scalar: Tracer, like: Tracer) -> Tracer:
    return lax.broadcast_in_dim(scalar, like.shape, tuple(range(_batch(like))))


def _inv(a: Tracer) -> Tracer:
    return lax.custom_call("numpy.linalg.inv", [a])[0]


def _solve(a: Tracer, b: Tracer) -> Tracer:
    return lax.custom_call("numpy.linalg.solve", [a, b])[0]


def _inv_jvp(eqn, tangents):
    return _neg(_mm(_mm(eqn.out, tangents[0]), eqn.out))


def _solve_jvp(eqn, tangents):
    a, b = eqn.args
    t_a, t_b = tangents
    rhs = t_b
    if t_a is not None:
        rhs = add_tangents(rhs, _neg(_mm(t_a, eqn.out)))
    return _solve(a, rhs)


def _adjugate(a: Tracer) -> Tracer:
    """adj(a), the matrix with a @ adj(a) = det(a) I, singular ``a`` included (det(a) inv(a)
    divides by zero there). From the SVD a = U diag(s) Vh: adj(a) = det(U) det(Vh) Vh^T
    diag(prod_{j != i} s_j) U^T, whose products leave s_i out instead of dividing by it."""
    u, s, vh = lax.custom_call("numpy.linalg.svd", [a])
    n = a.shape[-1]
    batch = a.shape[:-2]
    # the products leaving one out: row i of a (n, n) grid of s with a 1 on the diagonal
    rows = lax.broadcast_in_dim(s, batch + (n, n), tuple(range(len(batch))) + (len(batch) + 1,))
    diagonal = lax.compare(lax.iota(a.trace, "int64", (n, n), 0),
                           lax.iota(a.trace, "int64", (n, n), 1), "EQ")
    diagonal = lax.broadcast_in_dim(diagonal, rows.shape, (len(batch), len(batch) + 1))
    left_out = lax.reduce(lax.select(diagonal, lax.full_like(rows, 1.0), rows), "multiply",
                          (rows.ndim - 1,))
    sign = lax.elementwise("multiply", lax.custom_call("numpy.linalg.det", [u])[0],
                           lax.custom_call("numpy.linalg.det", [vh])[0])
    scaled = lax.elementwise(  # Vh^T diag(left_out): column j of Vh^T times left_out[j]
        "multiply", _mT(vh),
        lax.broadcast_in_dim(left_out, a.shape, tuple(range(len(batch))) + (len(batch) + 1,)))
    return lax.elementwise("multiply", _per_matrix(sign, a), _mm(scaled, _mT(u)))


def _det_jvp(eqn, tangents):
    (a,), (t_a,) = eqn.args, tangents
    # d det = trace(adj(a) @ da): the adjugate, not det * inv, so that a singular a has one
    return _trace_of_product(_adjugate(a), t_a)


def _slogdet_jvp(eqn, tangents):
    (a,), (t_a,) = eqn.args, tangents
    return [None, _trace_of_product(_inv(a), t_a)]


def _inv_vjp(eqn, ct):
    out_t = _mT(eqn.out)
    return [_neg(_mm(_mm(out_t, ct), out_t))]


def _solve_vjp(eqn, ct):
    a, _ = eqn.args
    g = _solve(_mT(a), ct)
    return [_neg(_mm(g, _mT(eqn.out))), g]


def _det_vjp(eqn, ct):
    (a,) = eqn.args
    return [lax.elementwise("multiply", _per_matrix(ct, a), _mT(_adjugate(a)))]


def _slogdet_vjp(eqn, ct):
    (a,) = eqn.args
    ct_logdet = ct[1]
    if ct_logdet is None:
        return [None]
    return [lax.elementwise("multiply", _per_matrix(ct_logdet, a), _mT(_inv(a)))]


TARGET_RULES.update({
    "numpy.linalg.inv": (_inv_jvp, _inv_vjp),
    "numpy.linalg.solve": (_solve_jvp, _solve_vjp),
    "numpy.linalg.det": (_det_jvp, _det_vjp),
    "numpy.linalg.slogdet": (_slogdet_jvp, _slogdet_vjp),
})
