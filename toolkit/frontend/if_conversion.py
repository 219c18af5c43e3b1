"""If-conversion of the user's small pure helpers: a data-dependent ``if`` becomes a select.

Scientific code keeps its branches in helpers: ``def match(b1, b2): if b1 + b2 == 3: return 1
else: return 0``, called as ``table[i, j] = max(..., table[i + 1, j - 1] + match(seq[i],
seq[j]))``. Each ``if`` on a traced value is a graph break, one per call of the helper: a
dynamic-programming fill becomes hundreds of segments. Compilers turn such branches into
predicated code (XLA's conditional-to-select, a vectoriser's if-conversion); toolkit does it
where Python allows it to be exact.

While a function is traced, each global function of its module that branches and is *pure*
(``purity.pure_helper``: its bytecode reads its arguments, NumPy and Python's pure builtins,
calls other pure helpers, and writes nothing but its own locals) is rebound (``frontend.namespace``)
to a wrapper that, given traced arguments, runs the helper once per path through its
data-dependent ``if``s: at each ``bool()`` of a traced value the path forces an outcome and
keeps the predicate. A pure function may run more than once without anyone seeing it. The
paths' results then merge, leaf by leaf, with a select on the predicates: equal values stay as
they are; traced arrays of one shape and dtype select; Python scalars of one type become a
weakly typed scalar, so that ``x + match(...)`` keeps ``x``'s dtype as the Python number would.

Where a merge could differ from Python in what it hands back (a Python int on one path and an
array on the other, arrays of different shapes or dtypes, other objects, an int beyond int32),
where a path needs another concrete value (``int()``, a mask's count), raises, or the paths
exceed ``MAX_PATHS``, the helper runs once more as a plain call, breaking the graph as before:
never a result that differs. A data-dependent error NumPy would raise on one path only (an
index out of range) is checked under that path's predicates."""
from __future__ import annotations

import functools
import math
import sys
import types
import weakref

import numpy

from .pytree import flatten, unflatten
from .tracer import Tracer, current_trace

MAX_PATHS = 8  # paths through one helper call's data-dependent ifs (both sides of each)
_INT_LIMIT = 2 ** 31  # a Python int merged into a traced scalar stays far from int64's ends


class Undecided(BaseException):
    """A path reached a ``bool()`` it has no outcome for (a BaseException: no ``except
    Exception`` in between may swallow it)."""


class Forking:
    """One path's forced outcomes, and the predicates it met, in order."""

    __slots__ = ("forced", "predicates")

    def __init__(self, forced: tuple):
        self.forced = forced
        self.predicates: list[Tracer] = []

    def decide(self, t: Tracer) -> bool:
        """``bool(t)`` on this path."""
        n = len(self.predicates)
        if n >= len(self.forced):
            raise Undecided()
        self.predicates.append(t)
        return self.forced[n]


# ---- the wrapper ---------------------------------------------------------------------------
_wrappers: "weakref.WeakKeyDictionary[types.FunctionType, object]" = weakref.WeakKeyDictionary()


def converting(fn: types.FunctionType):
    """``fn``'s stand-in while its module is traced (one per function)."""
    wrapper = _wrappers.get(fn)
    if wrapper is not None:
        return wrapper

    def convert_call(*args, **kwargs):
        return _converted_call(fn, args, kwargs)

    @functools.wraps(fn)
    def helper(*args, **kwargs):
        trace = current_trace()
        if trace is None or trace.forking is not None or not _has_tracer(args, kwargs):
            return fn(*args, **kwargs)  # (inside another helper's path: that one decides)
        tape = trace.tape
        if tape is None:
            return convert_call(*args, **kwargs)
        # one recorded operation at the user's line: a replayed call hands back its result
        return tape.operation(convert_call, args, kwargs, sys._getframe(1))

    helper.__toolkit_converts__ = fn
    _wrappers[fn] = helper
    return helper


def _has_tracer(args: tuple, kwargs: dict) -> bool:
    for v in (*args, *kwargs.values()):
        if isinstance(v, Tracer) or (isinstance(v, (tuple, list)) and any(
                isinstance(x, Tracer) for x in v)):
            return True
    return False


def _note(trace, fn, paths: int, why: str = "") -> None:
    """What became of one call of ``fn`` (``Trace.conversions``: helper -> [calls merged, most
    paths, {why not: calls}]), for the graph-break report."""
    code = fn.__code__
    key = (fn.__qualname__, f"{code.co_filename}:{code.co_firstlineno}")
    note = trace.conversions.get(key)
    if note is None:
        note = trace.conversions[key] = [0, 0, {}]
    if why:
        note[2][why] = note[2].get(why, 0) + 1
    else:
        note[0] += 1
        note[1] = max(note[1], paths)


def _converted_call(fn, args: tuple, kwargs: dict):
    trace = current_trace()
    checks_before, limits_before = len(trace.checks), dict(trace.int_limits)
    tape = trace._tape_in_op  # (the recorded operation this call is, if any)
    touched_before = len(tape.touched) if tape is not None else 0
    promotions_before = len(trace.promotions)
    finished: dict[tuple, tuple] = {}  # forced outcomes -> (predicates, result, checks)
    work, why = [()], ""
    while work:
        forced = work.pop()
        forking = Forking(forced)
        trace.forking, checks = forking, len(trace.checks)
        try:
            result = fn(*args, **kwargs)
        except Undecided:
            if len(finished) + len(work) + 2 > MAX_PATHS:
                why = f"more than {MAX_PATHS} paths through its data-dependent ifs"
                break
            work += [forced + (False,), forced + (True,)]
            continue
        except Exception as e:  # (a path that raises, or needs another concrete value)
            why = _why_not(e)
            break
        finally:
            trace.forking = None
            new_checks = trace.checks[checks:]
            del trace.checks[checks:]
        if not forced:  # no data-dependent branch on this call: the plain result
            trace.checks.extend(new_checks)
            return result
        finished[forced] = (forking.predicates, result, new_checks)
    else:
        merged, why = _merge(trace, finished)
        if not why and trace.int_limits != limits_before:
            why = "a path limits the range of a Python int argument"
        if not why:
            _note(trace, fn, len(finished))
            return merged
    _note(trace, fn, 0, why)
    # not convertible: the plain call (its break), with what the paths traced forgotten (no
    # predicate of theirs may stay alive: a live value crosses every break as a segment output)
    finished = forking = result = None
    if tape is not None:
        del tape.touched[touched_before:]  # (the views the paths made of the arguments)
    del trace.checks[checks_before:]
    del trace.promotions[promotions_before:]
    trace.int_limits = limits_before
    return fn(*args, **kwargs)


def _why_not(e: Exception) -> str:
    """A path's error in a few words: the first line of a concrete-value error names what it
    asked for (``int()``, a mask's count); other errors by their type."""
    from .errors import TracerConversionError

    if isinstance(e, TracerConversionError):
        first = str(e).split(" was called on a traced value")[0].split("\n")[0]
        return f"a path needs a concrete value ({first[:60]})"
    return f"a path raised {type(e).__name__}"


def _truth(t: Tracer) -> Tracer:
    """A traced value's truth as Python's ``bool()`` took it: a 0-d bool."""
    from .lax import compare, convert, full_like, reshape

    if t.shape != ():
        t = reshape(t, ())  # (bool() of a one-element array)
    if t.dtype != numpy.bool_:
        t = compare(t, full_like(t, 0), "NE") if t.dtype.kind != "b" else convert(t, numpy.bool_)
    return t


def _merge(trace, finished: dict) -> tuple[object, str]:
    """The paths' results as one, a select per leaf on the predicates, and "" ; or why a leaf
    cannot merge exactly. Each path's checks hold only under its own outcomes."""
    from .lax import broadcast_in_dim, elementwise, lift, select

    flat = {}
    for forced, (predicates, result, _) in finished.items():
        leaves, treedef, _ = flatten(result)
        flat[forced] = (leaves, treedef)
    treedefs = {str(td) for _, td in flat.values()}
    if len(treedefs) != 1:
        return None, f"the paths return different structures ({', '.join(sorted(treedefs))})"
    truths: dict[tuple, Tracer] = {}  # a decision's prefix -> its predicate's truth
    for forced, (predicates, _, _) in finished.items():
        for n, p in enumerate(predicates):
            truths.setdefault(forced[:n], p)
    for prefix in list(truths):
        truths[prefix] = _truth(truths[prefix])

    def under(forced: tuple) -> Tracer:  # the conjunction of a path's outcomes
        cond = None
        for n, outcome in enumerate(forced):
            t = truths[forced[:n]]
            t = t if outcome else elementwise("not", t)
            cond = t if cond is None else elementwise("and", cond, t)
        return cond

    n_leaves = len(next(iter(flat.values()))[0])
    treedef = next(iter(flat.values()))[1]
    # merge bottom-up: the deepest prefixes first, each a select of its two sides
    merged_leaves = []
    for k in range(n_leaves):
        values = {forced: flat[forced][0][k] for forced in finished}
        pending = dict(values)
        for prefix in sorted(truths, key=len, reverse=True):
            a, b = pending.get(prefix + (True,)), pending.get(prefix + (False,))
            m = _merge_leaf(trace, truths[prefix], a, b, lift, select, broadcast_in_dim)
            if isinstance(m, _Cannot):
                return None, m.why
            pending[prefix] = m
        merged_leaves.append(pending[()])
    for forced, (_, _, checks) in finished.items():
        cond = under(forced)
        for flag, error, message in checks:
            trace.checks.append((elementwise("and", flag, cond), error, message))
    return unflatten(treedef, merged_leaves), ""


class _Cannot:
    """Why two paths' values cannot be one exactly."""

    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why


def _same_scalar(a, b) -> bool:
    """Equal Python scalars of one type, zeros of one sign (a complex number's parts too)."""
    if isinstance(a, complex):
        return _same_scalar(a.real, b.real) and _same_scalar(a.imag, b.imag)
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def _kind(v) -> str:
    """A value's kind in the report's words: "an int", "a float64[3] array"."""
    if isinstance(v, Tracer):
        what = f"{'weak ' if v.weak_type else ''}{v.dtype}{list(v.shape)} array"
    elif isinstance(v, numpy.generic):
        what = f"NumPy {type(v).__name__}"
    else:
        what = type(v).__name__
    return ("an " if what[0] in "aeiou" else "a ") + what


def _merge_leaf(trace, truth: Tracer, a, b, lift, select, broadcast_in_dim):
    """``a if truth else b`` as one value, or a ``_Cannot`` where that would differ from what
    Python hands back on one side."""
    if a is b:
        return a
    ta, tb = type(a), type(b)
    if isinstance(a, Tracer) and isinstance(b, Tracer):
        if a.shape != b.shape or a.dtype != b.dtype or a.weak_type != b.weak_type:
            return _Cannot(f"the paths return {_kind(a)} and {_kind(b)}")
    elif ta is tb and ta in (int, float, bool, complex):
        if ta is int and not (-_INT_LIMIT <= a < _INT_LIMIT and -_INT_LIMIT <= b < _INT_LIMIT):
            return _Cannot("a path returns a Python int beyond int32 (a traced int64 could "
                           "overflow where Python's would not)")
        if _same_scalar(a, b):
            return a
        a, b = lift(trace, a), lift(trace, b)
    elif ta is tb and isinstance(a, numpy.generic) and a.dtype == b.dtype:
        a, b = lift(trace, a), lift(trace, b)
    elif a is None and b is None:
        return None
    else:
        return _Cannot(f"the paths return {_kind(a)} and {_kind(b)}")
    pred = broadcast_in_dim(truth, a.shape, ()) if a.shape != () else truth
    return select(pred, a, b)


__all__ = ["Forking", "Undecided", "MAX_PATHS", "converting"]
