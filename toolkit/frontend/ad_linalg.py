"""Derivatives of the ``np.linalg`` library calls (``custom-call``s): inv, solve, det and
slogdet, in both modes, with the standard matrix-calculus formulas (the ones JAX uses).
Matrices are the last two dimensions; leading dimensions batch. The other routines
(cholesky, qr, eigh, svd, ...) say by name that they are not differentiated yet."""
from __future__ import annotations

from . import lax
from .ad_rules import JVP_RULES, VJP_RULES, NotDifferentiableHere, add_tangents
from .decompositions import custom_call
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


def _target(inst) -> str:
    return inst.attrs["custom_call_target"]


def _inv(a: Tracer) -> Tracer:
    return custom_call("numpy.linalg.inv", [a])[0]


def _solve(a: Tracer, b: Tracer) -> Tracer:
    return custom_call("numpy.linalg.solve", [a, b])[0]


def _unsupported(inst):
    name = _target(inst).replace("numpy.", "np.", 1)
    raise NotDifferentiableHere(
        f"{name} is not differentiated yet (np.linalg's inv, solve, det and slogdet are)"
    )


def linalg_jvp(eqn, tangents):
    target = _target(eqn.inst)
    if target == "numpy.linalg.inv":
        return _neg(_mm(_mm(eqn.out, tangents[0]), eqn.out))
    if target == "numpy.linalg.solve":
        a, b = eqn.args
        t_a, t_b = tangents
        rhs = t_b
        if t_a is not None:
            rhs = add_tangents(rhs, _neg(_mm(t_a, eqn.out)))
        return _solve(a, rhs)
    if target == "numpy.linalg.det":
        (a,), (t_a,) = eqn.args, tangents
        return lax.elementwise("multiply", eqn.out, _trace_of_product(_inv(a), t_a))
    if target == "numpy.linalg.slogdet":
        (a,), (t_a,) = eqn.args, tangents
        return [None, _trace_of_product(_inv(a), t_a)]
    return _unsupported(eqn.inst)


def linalg_vjp(eqn, ct):
    target = _target(eqn.inst)
    if target == "numpy.linalg.inv":
        out_t = _mT(eqn.out)
        return [_neg(_mm(_mm(out_t, ct), out_t))]
    if target == "numpy.linalg.solve":
        a, _ = eqn.args
        g = _solve(_mT(a), ct)
        return [_neg(_mm(g, _mT(eqn.out))), g]
    if target == "numpy.linalg.det":
        (a,) = eqn.args
        scale = lax.elementwise("multiply", ct, eqn.out)
        return [lax.elementwise("multiply", _per_matrix(scale, a), _mT(_inv(a)))]
    if target == "numpy.linalg.slogdet":
        (a,) = eqn.args
        ct_logdet = ct[1]
        if ct_logdet is None:
            return [None]
        return [lax.elementwise("multiply", _per_matrix(ct_logdet, a), _mT(_inv(a)))]
    return _unsupported(eqn.inst)


JVP_RULES["custom-call"] = linalg_jvp
VJP_RULES["custom-call"] = linalg_vjp

__all__ = ["linalg_jvp", "linalg_vjp"]
