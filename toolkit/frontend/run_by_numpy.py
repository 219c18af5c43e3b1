"""A NumPy function toolkit does not compile, run by NumPy at a graph break.

torch.compile breaks its graph at an operation it cannot compile and runs that operation
eagerly; toolkit does the same for NumPy functions (and ufunc methods, and options of
functions) it has no rule for. Where the jitted function may break its graph, each traced
argument becomes its value (the segment traced so far runs: one break, the others are then
values Python holds), NumPy runs the function on copies of those values, and tracing goes on
with NumPy's results, which later segments take as parameters. Where it may not (``fullgraph``,
inside a loop body, a branch, grad or vmap), the error that names the function is raised.

What NumPy would change is changed: an argument NumPy wrote into (``np.putmask(a, ...)``,
``out=``) is written with the new value, through its views, and ``out=`` comes back as the
traced array itself. What toolkit cannot keep faithful raises instead of differing quietly: a
result that is a view of an argument (``as_strided``; writes to the argument later would not
show in it) and a write into one of two arguments that are views of one array.

The call ends the recording of the call's operations for the cache-hit replay
(``frontend.replay``): NumPy's results depend on the whole values, which a replay would have to
key by their bytes."""
from __future__ import annotations

import numpy as np

from .errors import UndefinedResultError, UnsupportedNumpyError
from .masked import materialized
from .tracer import Tracer, can_break


def run(func, args: tuple, kwargs: dict, name: str, error: UnsupportedNumpyError,
        why: str = "toolkit has no rule for it"):
    """``func(*args, **kwargs)`` run by NumPy at a graph break (``why``: in the break's reason),
    or ``error`` raised where the graph may not break."""
    if isinstance(error, UndefinedResultError):  # (NumPy would run it, into garbage)
        raise error
    args, kwargs = materialized(args), materialized(kwargs)  # (x[mask]: its array, once)
    tracers = _tracers((args, kwargs))
    breaker = next((b for b in map(can_break, tracers) if b is not None), None)
    if breaker is None or any(can_break(t) is None for t in tracers):
        raise error
    trace = tracers[0]._trace
    tape = trace._tape_in_op or trace.tape
    if tape is not None:
        tape.stop(f"{name}() ran in NumPy (its results are not recorded)")
    what = f"{name}() ran in NumPy: {why}"
    given: dict[int, tuple] = {}  # id(tracer) -> (tracer, its value, the copy NumPy gets)

    def value_of(t: Tracer) -> np.ndarray:
        if t.weak_type and not t.shape:  # a Python number, as NumPy meets it (weakly typed:
            # np.place(x_int8, m, [n]) refuses an n int8 cannot hold)
            return np.asarray(breaker.concrete(t, what)).item()
        entry = given.get(id(t))
        if entry is None:
            value = np.asarray(breaker.concrete(t, what))
            # a copy: NumPy may write into it, and the value may be a caller's array
            entry = given[id(t)] = (t, value, np.array(value, copy=True))
        return entry[2]

    result = func(*_replaced(args, value_of), **_replaced(kwargs, value_of))
    written = [(t, copy) for t, value, copy in given.values()
               if copy.tobytes() != np.ascontiguousarray(value).tobytes()]
    if written:
        _check_unaliased(written, [t for t, _, _ in given.values()], name)
        from .inplace import store_result
        for t, copy in written:
            store_result(t, trace.constant(copy, copy.dtype), f"{name}()")
    return _traced_results(result, given, name)


def _tracers(tree) -> list[Tracer]:
    """The traced values in ``tree`` (tuples, lists, dicts of them), each once, in order."""
    found, seen, stack = [], set(), [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Tracer):
            if id(node) not in seen:
                seen.add(id(node))
                found.append(node)
        elif isinstance(node, (list, tuple)):
            stack.extend(reversed(node))
        elif isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
    return found


def _replaced(tree, value_of):
    """``tree`` with each traced value as ``value_of`` it (containers rebuilt, as NumPy reads
    them: a named tuple stays one)."""
    if isinstance(tree, Tracer):
        return value_of(tree)
    if isinstance(tree, dict):
        return {k: _replaced(v, value_of) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        items = [_replaced(v, value_of) for v in tree]
        if isinstance(tree, list):
            return items
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    return tree


def _root(t: Tracer) -> Tracer:
    while t._view is not None:
        t = t._view[0]
    return t


def _check_unaliased(written: list, tracers: list[Tracer], name: str) -> None:
    """NumPy wrote into an argument: with another argument a view of the same array, NumPy
    would have seen the write through it, which the copies it got here could not."""
    roots = {}
    for t in tracers:
        roots.setdefault(id(_root(t)), []).append(t)
    for t, _ in written:
        if len(roots[id(_root(t))]) > 1:
            raise UnsupportedNumpyError(
                f"{name}() writes into an argument ({t.describe()}) that another argument views "
                "too; toolkit does not compile it and runs it in NumPy on copies, which would "
                "not see each other's writes. Pass a copy (x.copy()) as one of them.")


def _traced_results(result, given: dict, name: str):
    """NumPy's results, with ``out=`` (a copy NumPy got) as the traced array it stands for; a
    view into another argument's copy is refused (it would miss later writes to it)."""
    copies = {id(copy): t for t, _, copy in given.values()}

    def one(value):
        if isinstance(value, np.ndarray):
            t = copies.get(id(value))
            if t is not None:
                return t
            for t, _, copy in given.values():
                if copy.size and np.may_share_memory(value, copy):
                    raise UnsupportedNumpyError(
                        f"{name}() returns a view of its argument {t.describe()}; toolkit does "
                        "not compile it and runs it in NumPy on a copy, so the view would not "
                        "see later writes to that argument. Copy the result "
                        f"({name}(...).copy()) outside a jitted function, or write the "
                        "computation with indexing and slices.")
        return value

    if isinstance(result, tuple):  # (np.linalg's named tuples too)
        items = [one(v) for v in result]
        return type(result)(*items) if hasattr(result, "_fields") else tuple(items)
    if isinstance(result, list):
        return [one(v) for v in result]
    return one(result)
