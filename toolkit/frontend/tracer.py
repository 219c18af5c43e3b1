"""Tracing: a ``Trace`` records operations into an HLO computation; a ``Tracer`` stands for
one traced array and answers NumPy's protocols (``__array_ufunc__``, ``__array_function__``)."""
from __future__ import annotations

import operator
import sys
import threading
import weakref
from typing import Any

import numpy as np

from ..ir import dtypes as ir_dtypes
from ..ir.builder import ComputationBuilder, ModuleBuilder
from ..ir.evaluator import evaluate_cone
from ..ir.nodes import Instruction, Metadata
from ..ir.shapes import Shape
from ..ir.user_code import inside_users_try, is_users_file
from .errors import LeakedTracerError, TracerConversionError, UserTypeError
from .source_info import SourceLocation, user_location

_local = threading.local()
KNOWN_VALUE_LIMIT = 4096  # instructions walked to evaluate an argument-free traced value


def _not_given(node: Instruction):
    return None  # (an argument-free value: nothing is taken as given)


def _evaluable(node: Instruction) -> bool:
    return node.opcode != "parameter" and not node.no_known_value


_METADATA_KEPT = 1 << 16


class _OpScope:
    """``Trace.op_scope``'s context (a class: it is entered for every NumPy call traced)."""

    __slots__ = ("trace", "name", "outermost")

    def __init__(self, trace: "Trace", name: str):
        self.trace = trace
        self.name = name
        self.outermost = False

    def __enter__(self) -> None:
        trace = self.trace
        if trace._op_name is None:
            self.outermost = True
            trace._op_name, trace._location = self.name, user_location(2)

    def __exit__(self, *exc) -> bool:
        if self.outermost:
            self.trace._op_name, self.trace._location = None, None
        return False


def _stack() -> list[Trace]:
    try:
        return _local.stack
    except AttributeError:  # (a thread's first trace)
        stack = _local.stack = []
        return stack


def current_trace() -> Trace | None:
    try:
        stack = _local.stack
    except AttributeError:
        return None
    return stack[-1] if stack else None


class _Activation:
    __slots__ = ("trace", "stack")

    def __init__(self, trace: "Trace"):
        self.trace = trace

    def __enter__(self) -> "Trace":
        self.stack = stack = _stack()
        for outer in stack:
            outer.stop_tape("a nested trace (a transformation, a jitted function's own trace)")
        stack.append(self.trace)
        self.trace.active = True
        return self.trace

    def __exit__(self, *exc) -> None:
        self.trace.active = False
        self.stack.pop()


class Trace:
    """One function being traced into one entry computation."""

    def __init__(self, fn_name: str, parent: "Trace | None" = None, computation_name: str = "main",
                 building: bool = True):
        self.fn_name = fn_name
        # a nested trace (a loop body, a branch) builds a computation of the enclosing module;
        # values of enclosing traces it uses become extra parameters of it (``captures``)
        self.parent = parent
        if building:
            self.module = parent.module if parent is not None else ModuleBuilder(
                f"jit_{fn_name}")
            self.builder: ComputationBuilder = self.module.computation(computation_name)
        else:  # (a call that replays its record: its tape puts the recorded state here)
            self.module = self.builder = None
        self.captures: list[tuple[Tracer, Tracer]] = []  # (enclosing tracer, its parameter here)
        self._captured: dict[int, Tracer] = {}
        self.active = False
        self._op_name: str | None = None
        self._location: SourceLocation | None = None
        # small constants by (dtype, shape, bytes), and lax.lift's Python numbers by ("lifted",
        # type, value, dtype, weak): one instruction each per segment (graph breaks clear it;
        # a replay rebuilds it)
        self._constants: dict[tuple, Instruction] = {}
        # id -> (instruction kept alive, value)
        self._known: dict[int, tuple[Instruction, object]] = {}
        # parameter number -> (lowest, highest, dtype, where): the range of integers that a weak
        # (Python int) argument must lie in, because it meets an array of a narrower dtype
        self.int_limits: dict[int, tuple[int, int, np.dtype, str]] = {}
        # (instruction, lo, hi) of values a check of a Python int's range was made for
        self.narrowed: set = set()
        self.parameters: list[Tracer] = []
        # parameter number -> where: arguments whose reshape the trace took as a view, as NumPy
        # makes it of a C-contiguous array (of another layout it copies); checked on every call
        # that writes into them, where the difference shows (Trace.assume_contiguous). None:
        # nothing checks this trace's arguments (a jitted call's trace sets a dict)
        self.contiguous: dict[int, str] | None = None
        # data-dependent errors NumPy raises (an index out of range, an all-NaN slice): a scalar
        # pred per check, true when the error happens, and the error to raise after the call
        self.checks: list[tuple[Tracer, type, str]] = []
        # id of the frame that traces the function (frontend.trace_function): the user's try
        # blocks that matter to a check are between it and the operation
        self.entry_frame: int | None = None
        # float promotions by NumPy scalars (NEP 50): (location, what, from, to, the result)
        self.promotions: list[tuple[SourceLocation | None, str, np.dtype, np.dtype, Tracer]] = []
        # graph breaks: the jit layer's object that runs the program traced so far when Python
        # needs a concrete value (``breaker.concrete``), and weak references to every tracer of
        # this trace made since the last break (the values that may cross it)
        self.breaker = None
        self.born: list = []
        # the replay of a recorded call (frontend.replay.Tape) while it walks at the top level,
        # and the tape whose operation is running now (what the operation changes is noted)
        self.tape = None
        # a pure helper's path being traced (frontend.if_conversion.Forking): bool() of a
        # traced value takes the path's forced outcome, and nothing breaks the graph
        self.forking = None
        # (helper's name, where it is defined) -> [calls merged, most paths, {why not: calls}]
        self.conversions: dict[tuple[str, str], list] = {}
        # x[mask] kept dense (frontend.masked): its line -> [selections, {line that needed the
        # length: selections materialized there}]
        self.selections: dict[str, list] = {}
        self._tape_in_op = None
        self._metadata: dict[tuple, Metadata] = {}  # (op, file, line) -> its one Metadata
        if parent is not None:  # (a nested trace builds for real: the walk cannot follow it)
            parent.stop_tape("a nested trace (a loop body or a branch: tk.lax)")

    def close(self) -> None:
        """The call is over: drop the references that tie this trace and the call's helpers
        (the breaker, the tape, the parameters' tracers) into cycles, so that a call that ran in
        segments is freed by reference counting at once rather than by the cycle collector."""
        tape = self.tape or self._tape_in_op
        if tape is not None:
            tape.close()
        self.tape = self._tape_in_op = self.breaker = None
        self.parameters = []
        self.born = []

    def stop_tape(self, reason: str) -> None:
        """End the replay or recording of this call here: the trace is real from now on."""
        tape = self.tape or self._tape_in_op
        if tape is not None:
            tape.stop(reason)

    def note_argument_limit(self, value: Tracer, dtype: np.dtype) -> bool:
        """A weak integer ``value`` (a Python int) is made the integer ``dtype``, whose range
        does not hold every int64: NumPy 2 raises OverflowError when the Python int does not
        fit, where the compiled program would wrap it. If ``value`` is a Python-int argument
        itself, record the range to check on every call before the program runs and answer True;
        a value computed from arguments (False) the program checks (lax.check_weak_int_fits)."""
        inst = value.inst
        if not (self.parent is None and inst.opcode == "parameter"
                and self.builder._parameters.get(inst.attrs["parameter_number"]) is inst):
            return False
        info = np.iinfo(dtype)
        number = inst.attrs["parameter_number"]
        lo, hi, narrowest, where = self.int_limits.get(number, (info.min, info.max, dtype, ""))
        if info.max - info.min <= hi - lo:
            narrowest = dtype
            loc = self.location()
            where = f" at {loc}" if loc else ""
        self.int_limits[number] = (max(lo, int(info.min)), min(hi, int(info.max)), narrowest,
                                   where)
        return True

    def assume_contiguous(self, t: "Tracer", function: str) -> bool:
        """Take ``np.<function>(t)`` (a reshape) of the argument ``t`` as a view, as NumPy makes
        it where the caller's array is C-contiguous; False where ``t`` is not an argument's
        array (then it is not known to be contiguous: its reshape is not followed as a view)."""
        if self.contiguous is None:
            return False
        number = next((n for n, p in enumerate(self.parameters) if p is t), None)
        if number is None or t.weak_type:
            return False
        if number not in self.contiguous:
            loc = self.location()
            self.contiguous[number] = f"np.{function}{f' at {loc}' if loc else ''}"
        return True

    def activate(self) -> "_Activation":
        """A block in which this is the current trace (a class, not a generator: a call
        that breaks its graph enters it on every call)."""
        return _Activation(self)

    def op_scope(self, name: str) -> "_OpScope":
        """Attribute the instructions emitted inside to the NumPy-level op ``name`` and the
        user's line that called it (only the outermost scope counts)."""
        return _OpScope(self, name)

    def metadata(self, default_name: str) -> Metadata:
        """The metadata of an instruction emitted now. Equal metadata is one object: a Python
        loop emits the same few thousand times."""
        loc = self._location or user_location(3)
        key = (self._op_name or default_name, loc.file, loc.line) if loc is not None else \
            (self._op_name or default_name, "", 0)
        found = self._metadata.get(key)
        if found is None:
            name = f"jit({self.fn_name})/{key[0]}"
            found = Metadata(name, key[1], key[2]) if loc is not None else Metadata(name)
            if len(self._metadata) < _METADATA_KEPT:
                self._metadata[key] = found
        return found

    def location(self) -> SourceLocation | None:
        return self._location or user_location(3)

    def encloses(self, other: "Trace") -> bool:
        """Is ``other`` this trace or one it is nested in?"""
        t = self
        while t is not None:
            if t is other:
                return True
            t = t.parent
        return False

    def local(self, t: "Tracer") -> Instruction:
        """``t``'s instruction in this computation: a value of an enclosing trace becomes a
        parameter of this one (captured once), as autodidax joins a jaxpr's constants."""
        if t._trace is self:
            return t.inst
        if not (t._trace.active and self.encloses(t._trace)):
            raise LeakedTracerError(
                f"a traced value from another trace of jit({t._trace.fn_name}) was used here: "
                f"{t.describe()}. "
                "Traced values must not be stored in globals and used later; return them instead."
            )
        inner = self._captured.get(id(t.inst))
        if inner is None:
            outer_inst = self.parent.local(t)  # through every level in between
            number = len(self.builder._parameters)
            param = self.builder.parameter(
                number, t.inst.shape, f"captured_{number}", Metadata(t.describe())
            )
            inner = self._captured[id(t.inst)] = Tracer(self, param, t.weak_type)
            self.captures.append((Tracer(self.parent, outer_inst, t.weak_type), inner))
        return inner.inst

    def emit(self, opcode: str, operands=(), attrs=None, shape=None, weak: bool = False,
             name: str | None = None) -> Tracer:
        inst = self.builder.add(opcode, [self.local(t) for t in operands], attrs, shape,
                                self.metadata(name or opcode))
        return Tracer(self, inst, weak)

    def parameter(self, number: int, dtype: np.dtype, shape: tuple[int, ...], weak: bool,
                  path: str) -> Tracer:
        ir_shape = Shape(ir_dtypes.from_numpy(dtype), tuple(shape))
        inst = self.builder.parameter(number, ir_shape, path or f"Arg_{number}", Metadata(path))
        tracer = Tracer(
            self, inst, bool(weak), origin=f"argument '{path}'" if path else f"argument {number}"
        )
        if weak is None:  # (a NumPy scalar argument: immutable, returned as a NumPy scalar)
            tracer._scalar = True
        self.parameters.append(tracer)
        return tracer

    def mutated_parameters(self) -> list[tuple[int, Tracer]]:
        """(number, tracer) of the parameters written in place (``x += y``, ``x[i] = v``)."""
        return [(n, t) for n, t in enumerate(self.parameters)
                if t.inst is not self.builder._parameters.get(n)]

    def add_check(self, flag: Tracer, error: type, message: str) -> None:
        """Raise ``error(message)`` after a call in which the scalar ``flag`` is true, as NumPy
        raises it: the compiled program returns the flag as an extra output (lax.add_check
        reduces an array of flags to one)."""
        assert flag.ndim == 0, flag.shape
        loc = self.location()
        message = message + (f" (at {loc})" if loc else "")
        breaker = can_break(flag)
        if breaker is not None and inside_users_try(1, self.entry_frame):
            # the user's ``except`` must see it: NumPy raises here, so the check runs here (a
            # graph break; after the call, the error would escape the try)
            name = next((c.__name__ for c in error.__mro__ if c.__module__ == "builtins"
                         and issubclass(c, Exception)), error.__name__) \
                if error.__module__.startswith("toolkit") else error.__name__  # (IndexError)
            if np.asarray(breaker.concrete(flag, f"{name} checked inside try")).any():
                raise error(message)
            return
        self.checks.append((flag, error, message))

    def known_value(self, inst: Instruction):
        """The value of ``inst`` when it depends on no argument (made only from constants, as
        an ``np.zeros`` buffer filled with constants is), else None. Evaluated with the IR
        layer's evaluator; the walk is iterative and bounded, values are remembered."""
        if inst.no_known_value:
            return None
        value = evaluate_cone(inst, self._known, _not_given, _evaluable, KNOWN_VALUE_LIMIT)
        if value is None:
            object.__setattr__(inst, "no_known_value", True)  # (the same answer every time)
        return value

    def lifted_constant(self, key: tuple) -> Instruction | None:
        """The constant lax.lift made for ``key`` (a Python number, its dtype and weakness) in
        this segment, if any."""
        return self._constants.get(("lifted", *key))

    def remember_lifted(self, key: tuple, inst: Instruction) -> None:
        self._constants[("lifted", *key)] = inst

    def constant(self, value, dtype: np.dtype, weak: bool = False) -> Tracer:
        array = np.asarray(value, dtype=dtype)
        if array.ndim and array.size > 1 and self.breaker is not None and self.breaker.segmented:
            # once a function runs in segments, a NumPy array Python made (often from values it
            # was handed at a break: ``np.array(ids)``) is data, not code: a parameter, so the
            # segment compiles once per shape rather than once per value
            return self.breaker.parameter(array, weak, value)
        key = (array.dtype.str, array.shape, array.tobytes()) if array.size <= 16 else None
        if key is not None and key in self._constants:
            return Tracer(self, self._constants[key], weak)
        array = array.copy()
        array.flags.writeable = False
        inst = self.builder.add(
            "constant", (), {"literal": array}, metadata=self.metadata("constant")
        )
        if key is not None:
            self._constants[key] = inst
        return Tracer(self, inst, weak)


class Tracer:
    """A traced array: its shape, dtype and weak-typedness, and the instruction that makes it."""

    # _view: (parent tracer, basic index) when this is a view made by basic indexing, so writes
    # reach the parent as in NumPy; _views: weak references to the views taken of this one;
    # _alias_of: what this aliases when made by a view function toolkit does not track (reshape,
    # transpose ...), so writing through it is an error rather than a lost mutation.
    __slots__ = (
        "_trace",
        "inst",
        "weak_type",
        "_origin",
        "_view",
        "_views",
        "_alias_of",
        "_slot",
        "_scalar",
        "__weakref__",
    )
    __array_priority__ = 1000
    __hash__ = None  # traced arrays are not dict keys, as NumPy arrays are not

    def __init__(self, trace: Trace, inst: Instruction, weak_type: bool = False,
                 origin: str | None = None):
        self._trace = trace
        self.inst = inst
        self.weak_type = weak_type
        self._origin = origin
        self._view = None
        self._views = None
        self._alias_of = None
        self._slot = -1  # the order it was made in by the call's replayed operations
        # a NumPy scalar (np.float64 ...), not a 0-d array: what NumPy's ufuncs, reductions and
        # integer indexing return. It is immutable (``s += 1`` rebinds ``s``, never changing
        # another name's value) and comes back from the jitted function as a NumPy scalar
        self._scalar = False
        if trace.breaker is not None:
            trace.born.append(weakref.ref(self))

    @property
    def trace(self) -> Trace:
        """The trace operations on this value go to: its own, or the innermost active trace
        nested in it (where the value is captured as a parameter when used)."""
        own = self._trace
        stack = getattr(_local, "stack", None)  # (current_trace, inline: every operation asks)
        if not stack:
            return own
        current = stack[-1]
        if current is not own and current.parent is not None and current.encloses(own):
            return current
        return own

    # ---- abstract value ---------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.inst.shape.dims

    @shape.setter
    def shape(self, value) -> None:
        """``a.shape = (...)``: NumPy reshapes ``a`` in place (-1 allowed; a size that differs
        is NumPy's ValueError). This rebinds the tracer to the reshaped value. Where the reshape
        would have to reach other arrays (the caller's argument, a view's parent, the views of
        this one), toolkit cannot follow it: an error, never a write that goes astray."""
        from .errors import UnsupportedNumpyError

        trace = self._trace
        if any(p is self for p in trace.parameters):
            raise UnsupportedNumpyError(
                f"{self.describe()}.shape = {value!r}: assigning .shape to an argument would "
                "change the shape of the caller's array in NumPy, which toolkit cannot do; "
                "rebind a name instead (x = x.reshape(...))")
        view = self._view
        derived = view is not None and type(view[1]).__name__ == "DerivedView"
        if (view is not None and not derived) or any(ref() is not None
                                                     for ref in self._views or ()):
            raise UnsupportedNumpyError(
                f"{self.describe()}.shape = {value!r}: a view (or an array with live views) "
                "changing shape in place would break the link writes take to its parent; use "
                "y = x.reshape(...) instead")
        self.inst = self.reshape(value).inst  # ndarray.reshape, attached by dispatch
        if derived:  # (a reshape's view reshaped in place: it follows its parent reshaped)
            self._view = (view[0], view[1].reshaped(tuple(self.shape)))
        note_changed(self)

    @property
    def dtype(self) -> np.dtype:
        return self.inst.shape.dtype.numpy

    @property
    def ndim(self) -> int:
        return len(self.inst.shape.dims)

    @property
    def size(self) -> int:
        return self.inst.shape.size

    @property
    def aval_text(self) -> str:
        return self.inst.shape.to_text(False) + ("{weak}" if self.weak_type else "")

    @property
    def origin(self) -> str:
        if self._origin:
            return self._origin
        md = self.inst.metadata
        where = ""
        if md is not None and md.location:
            where = f" at {md.location}"
        op = md.op_name.split("/", 1)[-1] if md is not None and md.op_name else self.inst.opcode
        return f"the result of '{op}'{where}"

    def sources(self) -> list[str]:
        """Names of the arguments this value was computed from (walks the IR; errors only)."""
        from ..ir.nodes import post_order

        return [i.metadata.op_name for i in post_order([self.inst])
                if i.opcode == "parameter" and i.metadata is not None and i.metadata.op_name]

    def describe(self) -> str:
        if self._origin:
            return f"{self.aval_text} ({self._origin})"
        sources = self.sources()
        derived = f", computed from {', '.join(repr(s) for s in sources)}" if sources else ""
        return f"{self.aval_text} ({self.origin}{derived})"

    def __repr__(self) -> str:
        value = self._shown("repr()")
        return f"Tracer<{self.aval_text}, {self.origin}>" if value is None else repr(value)

    def __str__(self) -> str:
        value = self._shown("str()")
        return repr(self) if value is None else str(value)

    def __format__(self, spec: str) -> str:
        value = self._shown("format()")
        if value is None:
            if spec:
                raise self._concrete_error(f"formatting with '{spec}'")
            return repr(self)
        return format(value, spec)

    def _shown(self, how: str, asked_by_user: bool = False):
        """The value NumPy would print (``print(x)``, ``f"{loss:.3f}"`` in the user's code),
        through a graph break where the function allows one; None elsewhere, and when toolkit's
        own code describes the value (an error message: no program runs for it).
        ``asked_by_user``: the user's own ``print`` asks, through toolkit's stand-in for it."""
        if can_break(self) is None:
            return None
        caller = sys._getframe(2).f_code.co_filename
        if not asked_by_user and not is_users_file(caller):  # (toolkit's, NumPy's or
            return None  # IPython's own text of it)
        value = np.asarray(self._concrete(how))
        return value[()] if self._scalar and not value.shape else value

    def __len__(self) -> int:
        if not self.shape:
            raise UserTypeError("len() of unsized traced value (a scalar)")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise UserTypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    # ---- concretisation is impossible: explain why and what to do ---------------------
    def _concrete_error(self, what: str) -> TracerConversionError:
        loc = user_location(3)
        at = f" at {loc}" if loc else ""
        error = TracerConversionError(
            f"{what} was called on a traced value{at}: {self.describe()}.\n"
            "Inside a jitted function, arrays are abstract (only shape and dtype are known), so "
            "Python control flow (if/while/and/or) and bool()/int()/float() cannot depend on "
            "their values.\nFix: compute both branches and pick with tnp.where(cond, a, b); run "
            "one branch with tk.lax.cond(pred, true_fun, false_fun, *operands); loop with "
            "tk.lax.while_loop/fori_loop; or, if the value is really a Python constant, mark the "
            "argument static with static_argnums=/static_argnames=."
        )
        # what frontend.scalar_lists reads when a list of Python numbers caused this
        error.origin, error.location = self.origin, str(loc) if loc else ""
        return error

    # A traced array that depends on no argument (np.zeros(3) made inside the function, then
    # filled with constants) has a value now: Python may use it, as NumPy would.
    def _known(self):
        if self.inst.no_known_value:  # (asked before, maybe in an earlier call: a replay)
            return None
        return self.trace.known_value(self.inst) if self.trace.active else None

    def _concrete(self, what: str):
        """This value now: known without running anything, or, where the jitted function allows
        graph breaks, computed by running the program traced so far (``Trace.breaker``); else
        the error that explains why it cannot be had."""
        value = self._known()
        if value is not None:
            return value
        trace = current_trace()
        if trace is not None and trace.forking is not None and what == "bool()":
            return trace.forking.decide(self)
        breaker = can_break(self)
        if breaker is None:
            raise self._concrete_error(what)
        return breaker.concrete(self, what)

    def __bool__(self):
        return bool(self._concrete("bool()"))

    def __int__(self):
        return int(self._concrete("int()"))

    def __float__(self):
        return float(self._concrete("float()"))

    def __complex__(self):
        return complex(self._concrete("complex()"))

    def __index__(self):
        if self.dtype.kind not in "iub":
            raise self._concrete_error("use as an index (__index__)")
        value = self._concrete("use as an index (__index__)")
        return operator.index(value[()] if isinstance(value, np.ndarray) else value)

    def __array__(self, dtype=None, copy=None):
        value = self._known()
        if value is not None:
            return np.array(value, dtype=dtype)
        if can_break(self) is not None:
            return np.array(self._concrete("np.asarray()"), dtype=dtype)
        error = self._concrete_error("np.asarray() / conversion to a NumPy array")
        error.args = (error.args[0] + "\nIf this is a traced value written into a NumPy array made "
                      "inside the function (a = np.zeros(...); a[i] = ...), make that array with "
                      "toolkit.numpy instead (a = tnp.zeros(...), tnp.empty, tnp.ones, tnp.full, "
                      "tnp.zeros_like ...): it is then traced, and writes into it are too.",)
        raise error

    def tolist(self):
        return np.asarray(self._concrete("tolist()")).tolist()

    def item(self, *args):
        return np.asarray(self._concrete("item()")).item(*args)

    # NumPy protocols and operators are attached by frontend.dispatch.


def replayed_tracer(trace: Trace, inst: Instruction, weak_type: bool, origin: str | None,
                    slots: list, scalar: bool = False) -> Tracer:
    """A new tracer of a recorded instruction (``frontend.replay``): as ``Tracer(...)``, made
    since the last break, and given the next slot of the call's ``slots``; one weak reference
    serves both lists (this runs for every replayed operation)."""
    t = Tracer.__new__(Tracer)
    t._trace, t.inst, t.weak_type, t._origin = trace, inst, weak_type, origin
    t._view = t._views = t._alias_of = None
    t._scalar = scalar
    t._slot = len(slots)
    ref = weakref.ref(t)
    slots.append(ref)
    trace.born.append(ref)
    return t


def strongly_typed(t: Tracer) -> Tracer:
    """``t`` as NumPy holds it once a function has made an array of it: a Python number (a weak
    tracer) becomes a strongly typed value of its dtype."""
    if not t.weak_type:
        return t
    strong = Tracer(t._trace, t.inst, False, t._origin)
    strong._scalar = t._scalar
    return strong


def weakly_typed(t: Tracer) -> Tracer:
    """A 0-d ``t`` as the Python number (bool, int, float) a NumPy function returns of it
    (``np.allclose``: ``bool(res)``): weakly typed in arithmetic, and returned as a Python
    number (trace_function.python_numbers)."""
    assert not t.shape, t.shape
    return t if t.weak_type and not t._scalar else Tracer(t._trace, t.inst, True, t._origin)


def numpy_scalar(result):
    """``result`` as NumPy hands it back from a ufunc, a reduction or integer indexing: a 0-d
    result is a NumPy scalar (a new tracer marked so: never a view, immutable); anything else
    is itself."""
    if type(result) is Tracer and not result._scalar and not result.shape:
        scalar = Tracer(result._trace, result.inst, result.weak_type, result._origin)
        scalar._scalar = True
        return scalar
    return result


def note_changed(t: Tracer) -> None:
    """``t`` was rebound in place (a write, a view's refresh): the recorded operation running
    now must replay that too."""
    tape = t._trace._tape_in_op
    if tape is not None:
        tape.touched.append(t)


def python_every_call_breaker() -> tuple[bool, object]:
    """(a trace is active on this thread, the breaker that can make its call run its Python
    on every call or None): only the outermost trace of a jitted function that allows graph
    breaks can, never a loop body, a branch, a transformation or a helper's path."""
    trace = current_trace()
    if trace is None:
        return False, None
    breaker = trace.breaker
    if breaker is None or not trace.active or trace.forking is not None or \
            trace.parent is not None:
        return True, None
    return True, breaker


def can_break(t: Tracer):
    """The breaker that can make ``t`` concrete now, or None: breaks happen only in the
    outermost trace of a jitted function that allows them, never inside a loop body, a branch
    or a transformation (grad, vmap), whose programs must stay whole."""
    trace = t._trace
    breaker = trace.breaker
    if breaker is None or not trace.active or current_trace() is not trace or trace.forking:
        return None
    return breaker


def concrete_or_raise(value, what: str, error: Exception):
    """``value`` as a NumPy array: itself when not traced; when traced, its value through a
    graph break where one can happen, else ``error`` (a data-dependent size, say)."""
    if not isinstance(value, Tracer):
        return value
    known = value._known()
    if known is not None:
        return np.asarray(known)
    breaker = can_break(value)
    if breaker is None:
        raise error
    return np.asarray(breaker.concrete(value, what))


def check_same_trace(t: Tracer) -> Trace:
    trace = current_trace()
    if trace is not None and trace is not t._trace and t._trace.active and trace.encloses(t._trace):
        return trace  # a value of an enclosing trace, captured where it is used
    if not t.trace.active or (trace is not None and t.trace is not trace):
        raise LeakedTracerError(
            f"a traced value from an earlier trace of jit({t.trace.fn_name}) was used after that "
            f"trace ended: {t.describe()}. Traced values must not be stored in globals or "
            "closures and used later; return them from the jitted function instead.")
    return t.trace


__all__ = ["Trace", "Tracer", "current_trace", "note_changed", "replayed_tracer",
           "check_same_trace", "can_break", "concrete_or_raise", "Any"]
