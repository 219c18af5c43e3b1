"""Which of the user's functions are *pure*: may run more than once without anyone seeing it.

If-conversion (``if_conversion``) runs a helper once per path through its data-dependent
``if``s, so it converts only helpers whose bytecode, and that of every helper of their module
they call, holds reads of locals, arguments, module constants, NumPy, ``math`` and Python's
pure builtins, arithmetic, comparisons, jumps and calls of those: no stores but to its own
locals, no in-place operators, no ``out=``, no ``np.random``, no methods that write, no nested
functions, no ``try``. What is decided from the bytecode alone is decoded once per code
object; what depends on the module's globals is decided again at each scan of them."""
from __future__ import annotations

import builtins
import dis
import types
import weakref

import numpy

from .traced_builtins import TRACED_BUILTINS

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
    return _value_is_pure(name, namespace[name], fn, pending)


_UNBOUND = object()


def _free_variable(fn: types.FunctionType, name: str):
    """The value of ``fn``'s free variable ``name`` now (``_UNBOUND`` where it has none)."""
    code = fn.__code__
    if name not in code.co_freevars or fn.__closure__ is None:
        return _UNBOUND  # (a cell of its own: only a nested function, refused, makes one)
    try:
        return fn.__closure__[code.co_freevars.index(name)].cell_contents
    except ValueError:
        return _UNBOUND


def _value_is_pure(name: str, value, fn: types.FunctionType, pending: list) -> bool:
    """May ``fn`` read ``value`` (bound to ``name`` in its module or its closure) and call it,
    and stay pure?"""
    namespace = fn.__globals__
    if value is _UNBOUND:
        return False
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
            if op in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_ATTR", "LOAD_METHOD"):
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
        elif op == "LOAD_DEREF":  # (a variable of the enclosing function: a factory's)
            value = _free_variable(fn, name)
            if not _value_is_pure(name, value, fn, pending):
                return False
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


__all__ = ["pure_helper"]
