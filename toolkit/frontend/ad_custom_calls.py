"""Derivatives of ``custom-call``s: one rule for the op, dispatching on its target, as the op
table has one entry for it. Each library routine's module registers its own rules in
``TARGET_RULES`` (ad_linalg: np.linalg's); np.partition's and np.interp's are here. A routine
without rules says by name that it is not differentiated yet."""
from __future__ import annotations

import json
from typing import Callable

import numpy as np

from . import lax
from .ad_functions import jvp, vjp
from .ad_rules import JVP_RULES, VJP_RULES, NotDifferentiableHere, _along_axis, dense, instantiate

# target -> (jvp(eqn, tangents), vjp(eqn, cotangent))
TARGET_RULES: dict[str, tuple[Callable, Callable]] = {}


def _target(eqn) -> str:
    return eqn.inst.attrs["custom_call_target"]


def _rules(eqn) -> tuple[Callable, Callable]:
    rules = TARGET_RULES.get(_target(eqn))
    if rules is None:
        name = _target(eqn).replace("numpy.", "np.", 1)
        known = ", ".join(sorted(t.replace("numpy.", "np.", 1) for t in TARGET_RULES))
        raise NotDifferentiableHere(f"{name} is not differentiated yet (differentiated: {known})")
    return rules


def custom_call_jvp(eqn, tangents):
    return _rules(eqn)[0](eqn, tangents)


def custom_call_vjp(eqn, ct):
    return _rules(eqn)[1](eqn, ct)


JVP_RULES["custom-call"] = custom_call_jvp
VJP_RULES["custom-call"] = custom_call_vjp


# ---- np.partition: a permutation of each line, NumPy's argpartition's ------------------------
def _partition_order(eqn):
    """Where each entry of the partitioned result comes from, along the partition's axis:
    np.argpartition with the same positions, whose introselect moves the entries as
    np.partition's does."""
    options = eqn.inst.attrs["backend_config"]
    axis = json.loads(options)["axis"]
    order = lax.custom_call("numpy.argpartition", [eqn.args[0]], options)[0]
    return order, axis % eqn.args[0].ndim


def _partition_jvp(eqn, tangents):
    (t,) = tangents
    if t is None:
        return None
    order, axis = _partition_order(eqn)
    return _along_axis(dense(t), order, axis)


def _partition_vjp(eqn, ct):
    if ct is None:
        return [None]
    order, axis = _partition_order(eqn)  # result slot -> source
    position = lax.iota(order.trace, np.int64, order.shape, axis)
    inverse = lax.sort([order, position], axis, 1)[1]  # source -> result slot
    return [_along_axis(dense(ct), inverse, axis)]


def _integer_result(eqn, tangents):
    return None  # argpartition's positions are integers: no tangent


def _integer_result_vjp(eqn, ct):
    return [None]


TARGET_RULES["numpy.partition"] = (_partition_jvp, _partition_vjp)
TARGET_RULES["numpy.argpartition"] = (_integer_result, _integer_result_vjp)


# ---- np.interp: the derivatives of its traced form (searching.traced_interp) ------------------
def _interp_form(eqn):
    from .searching import traced_interp

    if json.loads(eqn.inst.attrs["backend_config"])["period"] is not None:
        raise NotDifferentiableHere("np.interp(period=) is not differentiated")
    return traced_interp


def _interp_jvp(eqn, tangents):
    form = _interp_form(eqn)
    _, t_out = jvp(form, list(eqn.args), [instantiate(t, a) for t, a in zip(tangents, eqn.args)])
    return t_out


def _interp_vjp(eqn, ct):
    _, pullback = vjp(_interp_form(eqn), list(eqn.args))
    return list(pullback(dense(ct)))


TARGET_RULES["numpy.interp"] = (_interp_jvp, _interp_vjp)
