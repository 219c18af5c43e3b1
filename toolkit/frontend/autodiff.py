"""``vjp``, ``jvp`` and ``value_and_grad`` inside a trace (JAX's names and conventions).

The function is traced into a nested computation (values of enclosing traces it uses are
captured, and treated as constants, as JAX treats closed-over values), then differentiated
by the engine into the current trace. Nested uses compose: the derivative is made of ordinary
instructions, so differentiating it again (``grad(grad(f))``) or compiling it (``jit``) works
like on any other program. The public wrappers, which also run these outside a trace, are in
``toolkit.transformations``."""
from __future__ import annotations

import operator
from typing import Callable, Sequence

import numpy as np

from . import ad_control  # noqa: F401  (registers the control-flow rules)
from . import checkpoint  # noqa: F401  (registers tk.checkpoint's rules)
from . import ad_custom_calls  # noqa: F401  (registers the custom-call rules: np.partition)
from . import ad_linalg  # noqa: F401  (registers the np.linalg rules)
from . import ad_collectives  # noqa: F401  (registers the collectives' rules)
from . import ad_windows  # noqa: F401  (registers reduce-window's rules)
from . import lax
from .ad_functions import jvp, vjp
from .errors import UserTypeError
from .pytree import flatten
from .tracer import Tracer


def _normalize_argnums(argnums, nargs: int, what: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    out = []
    for n in nums:
        n = operator.index(n)
        if not -nargs <= n < nargs:
            raise UserTypeError(
                f"{what}: argnums={argnums!r} but the function was called with {nargs} positional "
                "arguments"
            )
        out.append(n % nargs)
    return tuple(out)


def value_and_grad(fun: Callable, args: tuple, kwargs: dict, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, what: str = "grad"):
    """((value[, aux]), grads) of the scalar-valued ``fun`` at ``args``; ``grads`` has the
    structure of ``args[argnums]`` (a tuple of them when ``argnums`` is a tuple)."""
    nums = _normalize_argnums(argnums, len(args), what)
    for n in nums:
        leaves, _, paths = flatten(args[n])
        for v, p in zip(leaves, paths):
            dtype = (
                v.dtype if isinstance(v, (Tracer, np.ndarray, np.generic)) else np.asarray(v).dtype
            )
            if np.dtype(dtype).kind != "f":
                raise UserTypeError(
                    f"{what} requires floating-point inputs, but argument {n}{p} has dtype "
                    f"{np.dtype(dtype)}. "
                    "Integers and booleans have no derivative; pass them as another argument (not "
                    "in argnums), "
                    "or convert them with .astype(np.float64)."
                )

    def partial(*chosen):
        full = list(args)
        for n, value in zip(nums, chosen):
            full[n] = value
        return fun(*full, **kwargs)

    result = vjp(partial, tuple(args[n] for n in nums), has_aux=has_aux, user_fn=fun)
    out, pullback = result[0], result[1]
    leaves, tree, _ = flatten(out)
    if tree.kind != "leaf" or leaves[0].shape != () or leaves[0].dtype.kind != "f":
        shown = (
            leaves[0].describe()
            if tree.kind == "leaf" and isinstance(leaves[0], Tracer)
            else str(tree)
        )
        raise UserTypeError(
            f"{what} needs a function returning one real scalar; got {shown}. For several "
            "outputs use tk.vjp, or sum them first."
        )
    grads = pullback(lax.full_like(leaves[0], 1))
    grads = grads[0] if isinstance(argnums, int) else grads
    value = (out, result[2]) if has_aux else out
    return value, grads


__all__ = ["vjp", "jvp", "value_and_grad", "ad_control", "ad_linalg", "ad_collectives",
           "checkpoint"]
