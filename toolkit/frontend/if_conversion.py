"""If-conversion of the user's small pure helpers: a data-dependent ``if`` becomes a select.

Scientific code keeps its branches in helpers: ``def match(b1, b2): if b1 + b2 == 3: return 1
else: return 0``, called as ``table[i, j] = max(..., table[i + 1, j - 1] + match(seq[i],
seq[j]))``. Each ``if`` on a traced value is a graph break, one per call of the helper: a
dynamic-programming fill becomes hundreds of segments. Compilers turn such branches into
predicated code (XLA's conditional-to-select, a vectoriser's if-conversion); toolkit does it
where Python allows it to be exact.

While a function is traced, each global function of its module that branches and is *pure*
(``pure_helper``: its bytecode reads its arguments, NumPy and Python's pure builtins, calls
other pure helpers, and writes nothing but its own locals) is rebound (``frontend.namespace``)
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

import builtins
import dis
import functools
import math
import sys
import types
import weakref

import numpy

from .pytree import flatten, unflatten
from .traced_builtins import TRACED_BUILTINS
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


# ---- which helpers are pure ------------------------------------------------------------
_PURE_OPCODES = frozenset("""
RESUME NOP CACHE EXTENDED_ARG LOAD_FAST LOAD_FAST_CHECK LOAD_FAST_AND_CLEAR LOAD_FAST_LOAD_FAST
STORE_FAST STORE_FAST_LOAD_FAST STORE_FAST_STORE_FAST DELETE_FAST LOAD_CONST RETURN_CONST
RETURN_VALUE LOAD_DEREF COPY_FREE_VARS LOAD_GLOBAL LOAD_ATTR LOAD_METHOD PRECALL CALL CALL_KW
KW_NAMES PUSH_NULL BINARY_OP BINARY_SUBSCR BINARY_SLICE BUILD_SLICE BUILD_TUPLE BUILD_LIST
BUILD_MAP BUILD_CONST_KEY_MAP BUILD_STRING FORMAT_VALUE FORMAT_SIMPLE LIST_EXTEND LIST_TO_TUPLE
COMPARE_OP IS_OP CONTAINS_OP UNARY_NEGATIVE UNARY_NOT UNARY_INVERT UNARY_POSITIVE TO_BOOL
CALL_INTRINSIC_1 POP_JUMP_FORWARD_IF_FALSE POP_JUMP_FORWARD_IF_TRUE POP_JUMP_BACKWARD_IF_FALSE
POP_JUMP_BACKWARD_IF_TRUE POP_JUMP_FORWARD_IF_NONE POP_JUMP_FORWARD_IF_NOT_NONE
POP_JUMP_BACKWARD_IF_NONE POP_JUMP_BACKWARD_IF_NOT_NONE POP_JUMP_IF_FALSE POP_JUMP_IF_TRUE
POP_JUMP_IF_NONE POP_JUMP_IF_NOT_NONE JUMP_FORWARD JUMP_BACKWARD JUMP_BACKWARD_NO_INTERRUPT
JUMP JUMP_IF_FALSE_OR_POP JUMP_IF_TRUE_OR_POP POP_TOP COPY SWAP GET_ITER FOR_ITER END_FOR
UNPACK_SEQUENCE RAISE_VARARGS
""".split())
_PURE_BUILTINS = frozenset({
    "abs", "min", "max", "len", "range", "float", "int", "bool", "complex", "round", "sum",
    "pow", "divmod", "isinstance", "tuple", "list", "zip", "enumerate", "reversed", "sorted",
    "all", "any", "ValueError", "TypeError", "IndexError", "ArithmeticError"})
# what NumPy and math hold that changes state: a random generator's, an argument's (out=
# aside: a keyword argument named out is refused where it is passed), the error handling's
_IMPURE_LIBRARY = frozenset({
    "random", "copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis",
    "seterr", "seterrcall", "set_printoptions", "save", "savez", "savetxt", "load", "loadtxt",
    "memmap", "testing"})
# an array's methods and attributes that read it, and no more (sort, fill, put, resize and
# the in-place operators write; tofile and dump write a file)
_MUTATING_METHODS = frozenset({
    "fill", "sort", "put", "resize", "itemset", "partition", "setfield", "setflags",
    "byteswap", "dump", "dumps", "tofile", "__setitem__", "__delitem__", "__array_finalize__",
    "__setstate__"})
_READING_ATTRIBUTES = frozenset(name for name in dir(numpy.ndarray)
                                if name not in _MUTATING_METHODS and not name.startswith("__i"))
_CONSTANT_TYPES = (int, float, bool, complex, str, type(None))


def _library(value) -> bool:
    """NumPy (or the tracing NumPy that stands for it), math, or one of NumPy's submodules."""
    if not isinstance(value, types.ModuleType):
        return False
    name = getattr(value, "__name__", "") or ""
    return name == "math" or name.split(".")[0] == "numpy"


def _global_is_pure(name: str, fn: types.FunctionType, pending: list) -> bool:
    namespace = fn.__globals__
    if name not in namespace:
        return name in _PURE_BUILTINS  # (Python's own, looked up in builtins)
    value = namespace[name]
    if _library(value):
        return True
    if isinstance(value, types.FunctionType) and value.__globals__ is namespace:
        pending.append(getattr(value, "__toolkit_converts__", value))  # (checked in turn)
        return True
    if isinstance(value, _CONSTANT_TYPES) or (isinstance(value, tuple) and all(
            isinstance(v, _CONSTANT_TYPES) for v in value)):
        return True  # a module constant: read, never written (STORE_GLOBAL is refused)
    if getattr(value, "__toolkit_buffer__", False) or value is TRACED_BUILTINS.get(name):
        return True  # what the trace stands in for NumPy's buffers and for max/min
    if getattr(builtins, name, None) is value:
        return name in _PURE_BUILTINS
    module = getattr(value, "__module__", None) or ""
    return (callable(value) and module.split(".")[0] == "numpy"  # from numpy import ...
            and not module.startswith("numpy.random") and "testing" not in module
            and getattr(value, "__name__", name) not in _IMPURE_LIBRARY)


# code object -> its instructions as far as purity goes: None where the code alone rules it
# out, else (branches, (opname, name) of each global and attribute read, in order)
_DECODED: "weakref.WeakKeyDictionary[types.CodeType, tuple | None]" = weakref.WeakKeyDictionary()


def _decoded(code: types.CodeType) -> tuple | None:
    """What ``_code_is_pure`` reads of ``code``, decoded once (a notebook's namespace is
    scanned again whenever one of its names changes, and decoding bytecode is slow)."""
    try:
        return _DECODED[code]
    except KeyError:
        pass
    verdict = None
    if not code.co_flags & (0x20 | 0x80 | 0x100 | 0x200):  # not a generator or a coroutine
        reads, branches = [], False
        for ins in dis.get_instructions(code):
            op = ins.opname
            if op not in _PURE_OPCODES:
                break
            if op == "BINARY_OP" and ins.argrepr.endswith("=") and ins.argrepr != "==":
                break  # x += y writes x's array in place
            if op == "KW_NAMES":
                names = code.co_consts[ins.arg]
            elif op == "LOAD_CONST":  # (3.13 loads a call's keyword names as a constant)
                names = ins.argval if isinstance(ins.argval, tuple) else ()
            else:
                names = ()
            if "out" in names:
                break  # np.add(x, 1, out=y) writes y
            branches = branches or "IF" in op
            if op in ("LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD"):
                reads.append((op, ins.argval))
            else:
                reads.append(None)  # (ends an attribute chain)
        else:
            verdict = (branches, tuple(reads))
    _DECODED[code] = verdict
    return verdict


def _code_is_pure(fn: types.FunctionType, pending: list) -> bool:
    decoded = _decoded(fn.__code__)
    if decoded is None:
        return False
    library = None  # the module on top of the stack: NumPy, math or a submodule of NumPy
    for read in decoded[1]:
        if read is None:
            library = None
            continue
        op, name = read
        if op == "LOAD_GLOBAL":
            if not _global_is_pure(name, fn, pending):
                return False
            value = fn.__globals__.get(name)
            library = value if _library(value) else None
        elif library is not None:
            if name in _IMPURE_LIBRARY:
                return False
            # (a submodule keeps the chain in the library; a function or a ufunc ends it, so
            # that np.add.at, which writes its first argument, is an attribute of a value)
            found = getattr(library, name, None)
            library = found if _library(found) else None
        elif name not in _READING_ATTRIBUTES:
            return False
    return True


def pure_helper(fn, memo: dict | None = None) -> bool:
    """Does ``fn`` (a function of the traced module) branch, and may it run once per path
    without anyone seeing it? Its bytecode, and that of every helper of its module it calls,
    holds only reads of locals, arguments, module constants, NumPy, math and Python's pure
    builtins, arithmetic, comparisons, jumps and calls of those: no stores but to its own
    locals, no in-place operators, no ``out=``, no methods that write, no nested functions,
    no try blocks. The verdict holds for the module's globals as they are now (``memo``: the
    verdicts of one scan of them; a later scan decides again)."""
    if not isinstance(fn, types.FunctionType):
        return False
    memo = {} if memo is None else memo
    verdict = memo.get(id(fn))
    if verdict is not None:
        return verdict
    decoded = _decoded(fn.__code__)
    if decoded is None or not decoded[0]:
        memo[id(fn)] = False  # (impure, or no branch: nothing to convert)
        return False
    pending, seen, verdict = [fn], set(), True
    while pending:  # (the helpers it calls, iteratively: a call graph, not a recursion)
        f = pending.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if not _code_is_pure(f, pending):
            verdict = False
            break
    memo[id(fn)] = verdict
    return verdict


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


__all__ = ["Forking", "Undecided", "MAX_PATHS", "converting", "pure_helper"]
