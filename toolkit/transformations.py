"""JAX's transformations with JAX's names: ``grad``, ``value_and_grad``, ``jvp``, ``vjp``.

Inside a traced function (``tk.jit``, a loop body, another transformation) they differentiate
into the program being traced, so ``tk.jit(tk.grad(f))`` is one compiled program and
``tk.grad(tk.grad(f))`` a second derivative. Called on NumPy values outside any trace, they
compile the transformed function (once per argument shapes, as ``tk.jit`` does) and run it:
the derivative of NumPy code is itself compiled code. Python control flow that depends on
array values cannot be differentiated (use ``tk.lax.cond``/``fori_loop``/``scan``), as under
``jax.jit``."""
from __future__ import annotations

import collections
import functools
import threading
from typing import Callable, Sequence

from .api import jit
from .runtime.history import history_key
from .frontend import autodiff
from .frontend.checkpoint import checkpoint_call
from .frontend.vmap import vmap_call
from .frontend.pytree import flatten
from .frontend.tracer import Tracer, current_trace


def _name(fun) -> str:
    return getattr(fun, "__name__", type(fun).__name__)


def _traced_now(*values) -> bool:
    return current_trace() is not None or any(isinstance(v, Tracer) for v in flatten(values)[0])


class _Transformed:
    """A transformed function: traced inline inside a trace, compiled and run outside one."""

    def __init__(self, fun: Callable, name: str, impl: Callable):
        self.fun = fun
        self.__name__ = name
        self.__wrapped__ = fun
        self._impl = impl
        self._compiled = None
        functools.update_wrapper(self, fun, assigned=("__module__", "__doc__"), updated=())

    def __call__(self, *args, **kwargs):
        if _traced_now(args, kwargs):
            return self._impl(*args, **kwargs)
        if self._compiled is None:
            impl = self._impl

            def run(*a, **k):
                return impl(*a, **k)

            run.__name__ = self.__name__.replace("(", "_").replace(")", "")
            # its compile history belongs to the user's function (not to this line, shared by all)
            run.__toolkit_history_key__ = ("transformed", self.__name__, history_key(self.fun))
            run.__wrapped__ = self.fun  # reports name the user's function, not this line
            self._compiled = jit(run)
        return self._compiled(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self.__name__}>"


# each function's transformed forms: tk.grad(f) written again, in a training loop say, is the
# same transformed function, and its compiled programs are reused. A bounded LRU; an entry holds
# its function, so the id in its key cannot be reused by another object while it is kept.
TRANSFORM_CACHE_SIZE = 128
_RUNNERS: "collections.OrderedDict[tuple, _Transformed]" = collections.OrderedDict()
_RUNNERS_LOCK = threading.Lock()


def _runner(fun: Callable, kind: tuple | str, make: Callable) -> "_Transformed":
    key = (id(fun), kind)
    with _RUNNERS_LOCK:
        found = _RUNNERS.get(key)
        if found is not None and found.fun is fun:
            _RUNNERS.move_to_end(key)
            return found
        made = _RUNNERS[key] = make()
        while len(_RUNNERS) > TRANSFORM_CACHE_SIZE:
            _RUNNERS.popitem(last=False)
        return made


def value_and_grad(
    fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable:
    """``f(*args) -> (value, gradient)`` of the scalar-valued ``fun``; the gradient has the
    structure of the ``argnums`` argument(s). With ``has_aux``, ``fun`` returns ``(value, aux)``
    and the result is ``((value, aux), gradient)``."""
    def impl(*args, **kwargs):
        return autodiff.value_and_grad(fun, args, kwargs, argnums, has_aux, what="value_and_grad")
    return _runner(fun, ("value_and_grad", repr(argnums), has_aux),
                   lambda: _Transformed(fun, f"value_and_grad({_name(fun)})", impl))


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The gradient of the scalar-valued ``fun`` with respect to argument(s) ``argnums``."""
    def impl(*args, **kwargs):
        value, grads = autodiff.value_and_grad(fun, args, kwargs, argnums, has_aux, what="grad")
        return (grads, value[1]) if has_aux else grads
    return _runner(
        fun,
        ("grad", repr(argnums), has_aux),
        lambda: _Transformed(fun, f"grad({_name(fun)})", impl),
    )


def jvp(fun: Callable, primals: Sequence, tangents: Sequence):
    """``(fun(*primals), the derivative of fun at primals along tangents)``: forward mode."""
    primals, tangents = tuple(primals), tuple(tangents)
    if _traced_now(primals, tangents):
        return autodiff.jvp(fun, primals, tangents)
    runner = _runner(
        fun,
        "jvp",
        lambda: _Transformed(fun, f"jvp({_name(fun)})", lambda p, t: autodiff.jvp(fun, p, t)),
    )
    return runner(primals, tangents)


def vjp(fun: Callable, *primals, has_aux: bool = False):
    """``(fun(*primals), pullback)`` (and ``aux`` with ``has_aux``): ``pullback(cotangent)``
    is the cotangent's product with fun's Jacobian, a tuple shaped like ``primals``. Outside a
    trace both run compiled; the pullback recomputes the forward pass when called."""
    if _traced_now(primals):
        return autodiff.vjp(fun, primals, has_aux)
    forward = _runner(fun, f"vjp{has_aux}", lambda: _Transformed(
        fun, f"vjp({_name(fun)})",
        lambda *p: autodiff.vjp(fun, p, has_aux)[::2] if has_aux else autodiff.vjp(fun, p)[0]))
    result = forward(*primals)
    backward = _runner(fun, f"pullback{has_aux}", lambda: _Transformed(
        fun, f"vjp_pullback({_name(fun)})", lambda p, ct: autodiff.vjp(fun, p, has_aux)[1](ct)))

    def pullback(cotangent):
        return backward(primals, cotangent)

    if has_aux:
        out, aux = result
        return out, pullback, aux
    return result, pullback


def vmap(fun: Callable, in_axes=0, out_axes=0, axis_size: int | None = None) -> Callable:
    """``fun`` mapped over an axis of its arguments (``in_axes``: an int or None for all, or
    one entry per positional argument), its outputs stacked along ``out_axes``: one batched
    program, no Python loop."""
    def impl(*args, **kwargs):
        return vmap_call(fun, args, kwargs, in_axes, out_axes, axis_size)
    return _runner(fun, ("vmap", repr(in_axes), repr(out_axes), axis_size),
                   lambda: _Transformed(fun, f"vmap({_name(fun)})", impl))


def checkpoint(fun: Callable) -> Callable:
    """``fun``, whose intermediates the backward pass recomputes instead of keeping (JAX's
    ``jax.checkpoint``): less memory between the passes, one more forward computation of
    ``fun``. Outside differentiation it is ``fun``."""
    def wrapped(*args, **kwargs):
        if _traced_now(args, kwargs):
            return checkpoint_call(fun, args, kwargs)
        return fun(*args, **kwargs)
    functools.update_wrapper(wrapped, fun)
    return wrapped


remat = checkpoint

__all__ = ["grad", "value_and_grad", "jvp", "vjp", "vmap", "checkpoint", "remat"]
