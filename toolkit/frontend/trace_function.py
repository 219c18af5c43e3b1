"""Tracing a Python function with abstract arguments into an HLO module."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..ir.nodes import Module
from . import dispatch  # noqa: F401  (attaches NumPy protocols to Tracer)
from . import lax
from .errors import (LeakedTracerError, UnsupportedNumpyError, UserOverflowError, UserTypeError,
                     UserValueError)
from .captured import Captured, CapturedChanged, values_captured
from .inplace import check_mutation_targets, write_back
from .held_generators import generators_held_by_objects_traced
from .namespace import numpy_buffers_traced
from .python_effects import python_state_watched, stored_tracers_in
from .reach import reach
from .masked import MaskedSelection, materialized
from .pytree import TreeDef, flatten
from .signature import ArgSpec
from .segments import GraphBroken
from .replay import replayable_function
from .tracer import Trace, Tracer, current_trace
from .views import argument_view

@dataclass(frozen=True)
class TracedProgram:
    module: Module
    in_specs: tuple[ArgSpec, ...]
    out_tree: TreeDef
    out_paths: tuple[str, ...]
    # (leaf index, lowest, highest, dtype, where): Python-int arguments that meet narrower arrays
    int_limits: tuple[tuple[int, int, int, np.dtype, str], ...] = ()
    # leaf indices of arguments written in place; their new values follow the user's outputs
    mutated: tuple[int, ...] = ()
    # (error type, message) per runtime check; their flags are the last outputs
    checks: tuple[tuple[type, str], ...] = ()
    # float promotions by NumPy scalars: (location, what, from dtype, to dtype, instruction)
    promotions: tuple = ()
    # output leaf indices where the function returned a Python number (``return n + 1`` on
    # Python ints, ``x.shape[0] * 2``): a constant of the program, returned as that Python
    # number, as NumPy returns it, not as a 0-d array
    python_outputs: tuple[int, ...] = ()
    # output leaf indices NumPy returns as NumPy scalars (a reduction, a ufunc's 0-d result,
    # x[i, j]: np.float64, not a 0-d array)
    scalar_outputs: tuple[int, ...] = ()
    # arrays read from outside the arguments, lifted into the last parameters (their specs end
    # ``in_specs``), and the numbers read so, guarded (frontend.captured); None: nothing was
    captured: Captured | None = None
    # (output leaf index, argument leaf index, NumPy view steps): results that are, in NumPy,
    # an argument itself or a view of it (``return x``, ``x[1:]``, ``x.T``); the call returns
    # the caller's array or a view sharing its memory (frontend.views.argument_view)
    view_outputs: tuple[tuple[int, int, tuple], ...] = ()
    # (argument leaf index, where): arguments written in place whose reshape the program
    # takes as a view, as NumPy makes it of a C-contiguous array; checked on every call
    contiguous: tuple[tuple[int, str], ...] = ()

    @property
    def argument_count(self) -> int:
        """The call's own leaves: ``in_specs`` without the lifted arrays."""
        return len(self.in_specs) - (len(self.captured.arrays) if self.captured else 0)

    @property
    def has_extra_outputs(self) -> bool:
        return bool(self.mutated or self.checks or self.view_outputs)

    def split_results(self, leaves, results):
        """The user's results. A runtime check that failed raises NumPy's error (before any
        argument is written); the new values of arguments written in place are copied into the
        caller's arrays (after checking, before the call, that they can be: ``check_mutable``)."""
        results = list(results)
        if self.checks:
            flags = results[-len(self.checks):]
            results = results[:-len(self.checks)]
            for flag, (error, message) in zip(flags, self.checks):
                if bool(np.asarray(flag)):
                    raise error(message)
        if self.mutated:
            k = len(self.mutated)
            write_back(leaves, self.mutated, results[-k:])
            results = results[:-k]
        return replace_views(results, leaves, self.view_outputs)  # (after the writes)

    def check_mutable(self, leaves) -> None:
        if self.mutated:
            check_mutation_targets(leaves, self.mutated, [s.path for s in self.in_specs])
        if self.contiguous:
            check_contiguous(leaves, self.contiguous, self.in_specs)

    def check_int_limits(self, leaves) -> None:
        """NumPy 2 raises OverflowError when a Python int does not fit the array it meets; the
        compiled program would wrap it, so every call checks its weak integer arguments."""
        for index, lo, hi, dtype, where in self.int_limits:
            value = leaves[index]
            if type(value) is int and not lo <= value <= hi:
                raise UserOverflowError(
                    f"Python integer {value} out of bounds for {dtype}: argument "
                    f"'{self.in_specs[index].path}' meets an array of dtype {dtype}{where}, as "
                    "NumPy 2 "
                    "(NEP 50) refuses too. Pass it as np.int64(...) or a wider array to compute "
                    "in int64."
                )


def trace_program(fn: Callable, name: str, specs: Sequence[ArgSpec],
                  rebuild: Callable[[list[Tracer]], tuple[tuple, dict]],
                  breaker=None, capture: str | None = None) -> TracedProgram | GraphBroken:
    """Trace ``fn`` on parameters described by ``specs``; ``rebuild`` turns the parameter
    tracers back into the call's (args, kwargs), static values included.

    With a ``breaker`` (the jit layer's, bound to this call's argument values) Python may ask
    for a traced value's concrete value: the program traced so far runs, and tracing goes on.
    If that happened, the whole call has run by the time ``fn`` returns, and ``GraphBroken``
    carries its result instead of a program: raised, or returned where the breaker is one of
    a signature known to break (``breaker.always``).

    ``capture``: what becomes of data the code reads from outside its arguments (globals,
    closures, attributes: ``frontend.captured``): "lift" (arrays become the last parameters,
    numbers guarded constants), or None (constants, unguarded: an SPMD program)."""
    trace = Trace(name, building=breaker is None or not breaker.replays())
    trace.breaker = breaker  # before the parameters: they are values that may cross a break
    trace.contiguous = {}  # (the call checks the layouts its reshapes of arguments assumed)
    trace.entry_frame = id(sys._getframe())
    with trace.activate():
        if breaker is not None:  # (a call it has seen before replays: frontend.replay)
            params = breaker.parameters(trace, specs)
            breaker.start(trace, params)
        else:
            params = [trace.parameter(i, s.dtype, s.shape, s.weak_type, s.path)
                      for i, s in enumerate(specs)]
        args, kwargs = rebuild(params)
        # (a recorded call: what its code reaches of Python's state is watched; the first
        # block entered is left last, after the others put their stand-ins back)
        # (and on every call of one that left traced values in that state: they become values)
        recording = trace.tape is None or not trace.tape.replaying
        watched = recording or (breaker is not None and breaker.stores_state())
        reached = reach(fn, args, kwargs) if watched else None

        def lifted_parameter(path: str, value: np.ndarray) -> Tracer:
            tracer = trace.parameter(len(trace.parameters), value.dtype, value.shape, False, path)
            if breaker is not None:  # (a value that may cross a break, and be written)
                breaker.lift(tracer, value, ArgSpec(path, value.shape, value.dtype, False))
            return tracer

        # (a call traced anew: data read from outside is lifted and guarded)
        capturing = reached if capture is not None and trace.tape is None else None
        with python_state_watched(reached) as state, \
                values_captured(capturing, lifted_parameter) as captured, \
                numpy_buffers_traced(fn), generators_held_by_objects_traced(reached):
            given = _containers(args, kwargs, fn)
            try:
                result = fn(*args, **kwargs)
                _check_containers_kept(given, name)
            except (GraphBroken, UnsupportedNumpyError, CapturedChanged):
                raise
            except Exception:
                # NumPy has made the writes before the failing line when the error comes:
                # they run now (the segment traced so far), and the error goes on
                _write_what_ran(trace, breaker)
                raise
            leaves, out_tree, out_paths = flatten(result, is_static=_static_output)
            # (an x[mask] returned as it is: its length is needed now, before the checks below)
            if any(type(leaf) is MaskedSelection for leaf in leaves):
                leaves = [materialized(leaf) for leaf in leaves]
        stored = state.stored_tracers(trace) if breaker is not None else []
        if stored:  # (a change of state: the call is in segments already, python_effects)
            breaker.note_stores_state()
        if breaker is not None and (breaker.broken or breaker.always):
            outs = [_as_output(trace, leaf, path, replayable=True)
                    for leaf, path in zip(leaves, out_paths)]
            try:
                # (one value per traced value, stored in two places: one object, as in NumPy)
                distinct = list({id(t): t for _, item in stored
                                 for t in stored_tracers_in(item, trace)}.values())
                result = breaker.finish(outs, out_tree, python_numbers(leaves),
                                        numpy_scalars(leaves), distinct)
                state.put_values(stored, {id(t): v for t, v in
                                          zip(distinct, breaker.stored_values)})
            finally:
                trace.close()
            broken = GraphBroken(result, breaker.python_ints)
            if breaker.always:  # (expected on every call of its signature: no raise to unwind)
                return broken
            raise broken
        outs = [_as_output(trace, leaf, path) for leaf, path in zip(leaves, out_paths)]
        view_outputs = argument_views(outs, trace.parameters)
        mutated = [(n, t) for n, t in trace.mutated_parameters() if not t.weak_type]
        written = {n for n, _ in mutated}
        contiguous = tuple((n, where) for n, where in sorted(trace.contiguous.items())
                           if n in written)
        checks = [flag for flag, _, _ in trace.checks]
        if len(outs) == 1 and out_tree.kind == "leaf" and not mutated and not checks:
            root = outs[0].inst
        else:
            root = trace.builder.add("tuple", [o.inst for o in outs] + [t.inst for _, t in mutated]
                                     + [c.inst for c in checks])
        # must-alias: the new value goes into the caller's buffer, so a backend may write it in
        # place; with runtime checks it may not (a failed check must leave the arguments as they
        # were)
        kind = "may-alias" if checks else "must-alias"
        aliases = ", ".join(
            f"{{{len(outs) + k}}}: ({n}, {{}}, {kind})" for k, (n, _) in enumerate(mutated)
        )
        attributes = ((("input_output_alias", f"{{ {aliases} }}"),) if mutated else ())
        entry = trace.builder.build(root)
        if captured.arrays:  # (lifted arrays the program never reads are not read per call)
            captured.keep_used({id(o) for inst in entry.instructions for o in inst.operands}
                               | {id(root)} | {id(t.inst) for _, t in mutated})
        module = trace.module.build(entry, attributes)
    limits = tuple((number, lo, hi, dtype, where)
                   for number, (lo, hi, dtype, where) in sorted(trace.int_limits.items()))
    lifted = tuple(ArgSpec(a.path, a.shape, a.dtype, False) for a in captured.arrays)
    return TracedProgram(
        module,
        tuple(specs) + lifted,
        out_tree,
        tuple(out_paths),
        limits,
        tuple(n for n, _ in mutated),
        tuple((error, message) for _, error, message in trace.checks),
        tuple((loc, what, narrow, wide, t.inst) for loc, what, narrow, wide, t in trace.promotions),
        python_numbers(leaves),
        numpy_scalars(leaves),
        captured if captured.arrays or captured.guards else None,
        view_outputs,
        contiguous,
    )


def argument_views(outs: list[Tracer], parameters: list[Tracer]) -> tuple:
    """The outputs that are arguments or views of them in NumPy (``TracedProgram.view_outputs``);
    Python numbers (weak parameters) are values, never returned as themselves."""
    arrays = {id(p): n for n, p in enumerate(parameters) if not p.weak_type}
    found = []
    for n, out in enumerate(outs):
        where = argument_view(out, arrays)
        if where is not None:
            found.append((n, *where))
    return tuple(found)


def _containers(args: tuple, kwargs: dict, fn) -> list:
    """(path, container, its items then) for each dict and list the call's arguments hold: the
    function gets copies of the caller's containers (their arrays traced), so what it changes
    in them would not reach the caller."""
    code = getattr(fn, "__code__", None)
    names = list(code.co_varnames[:code.co_argcount]) if code is not None else []
    found, pending = [], [(names[k] if k < len(names) else f"args[{k}]", a)
                          for k, a in enumerate(args)] + [(k, v) for k, v in kwargs.items()]
    while pending:
        path, value = pending.pop()
        if type(value) is dict:
            found.append((path, value, list(value.items())))
            pending.extend((f"{path}[{k!r}]", v) for k, v in value.items())
        elif type(value) is list:
            found.append((path, value, list(value)))
            pending.extend((f"{path}[{k}]", v) for k, v in enumerate(value))
        elif type(value) is tuple:
            pending.extend((f"{path}[{k}]", v) for k, v in enumerate(value))
    return found


def _check_containers_kept(given: list, name: str) -> None:
    """Refuse a function that adds, removes or replaces items of a dict or list argument
    (``d['y'] = ...``, ``l.append(...)``): NumPy would change the caller's container; here the
    change would be lost. Writes into the arrays themselves (``d['x'][0] = v``, ``d['x'] +=
    1``) reach the caller, and are fine."""
    for path, container, items in given:
        now = list(container.items()) if type(container) is dict else list(container)
        same = len(now) == len(items) and all(
            (a[0] == b[0] and a[1] is b[1]) if type(container) is dict else a is b
            for a, b in zip(now, items))
        if not same:
            raise UnsupportedNumpyError(
                f"jit({name}): the function changes what its argument '{path}' holds (adds, "
                "removes or replaces an item); it works on a copy of the caller's "
                f"{type(container).__name__}, so the caller would not see the change. Write "
                "into the arrays in place (d['x'][...] = v) or return the new container")


def _write_what_ran(trace: Trace, breaker) -> None:
    """The arguments (and arrays read from outside) the call wrote before its Python raised,
    written into the caller's arrays, as NumPy's writes would stand: the program traced so far
    runs as the call's last segment. Where the graph may not break, nothing runs (the error
    says what failed; the arguments keep their values)."""
    if breaker is None or trace is not current_trace():
        return
    if not any(not t.weak_type and t.inst is not breaker.bound.get(id(t.inst), (None,))[0]
               for t in breaker.arguments):
        return
    empty = flatten(())[1]
    try:
        breaker.finish([], empty)
    finally:
        trace.close()


def python_numbers(leaves) -> tuple[int, ...]:
    """The indices of the returned ``leaves`` that are Python numbers: Python made them, or
    they are traced values computed from Python numbers alone (weakly typed, 0-d, not a NumPy
    scalar: ``n * 2`` of a Python int argument, which NumPy leaves a Python int)."""
    return tuple(n for n, leaf in enumerate(leaves)
                 if type(leaf) in (bool, int, float, complex) or (
                     type(leaf) is Tracer and leaf.weak_type and not leaf._scalar
                     and not leaf.shape))


def numpy_scalars(leaves) -> tuple[int, ...]:
    """The indices of the returned ``leaves`` that NumPy hands back as NumPy scalars: traced
    ones marked so (``Tracer._scalar``) and NumPy scalars Python made."""
    return tuple(n for n, leaf in enumerate(leaves)
                 if isinstance(leaf, np.generic) or (type(leaf) is Tracer and leaf._scalar))


def as_python_numbers(results: list, python_outputs: tuple[int, ...],
                      scalar_outputs: tuple[int, ...] = ()) -> list:
    """``results`` with the leaves at ``python_outputs`` (0-d host arrays) as Python numbers
    and those at ``scalar_outputs`` as NumPy scalars."""
    results = list(results)
    for n in python_outputs:
        value = results[n]
        if isinstance(value, (np.ndarray, np.generic)):
            results[n] = value.item()
    for n in scalar_outputs:
        value = results[n]
        if type(value) is np.ndarray and not value.shape:
            results[n] = value[()]
    return results


# what a jitted function may return that is no array: part of the result's structure, returned
# as it is (a dtype, a string made with f"{loss:.3f}" in a call that broke its graph for it)
_STATIC_OUTPUTS = (str, bytes, np.dtype, type, slice, type(Ellipsis), range)


def _static_output(leaf) -> bool:
    # (and a Python int no int64 holds, int(x[0]) of a uint64 beyond 2**63: returned as it is)
    return isinstance(leaf, _STATIC_OUTPUTS) or (
        type(leaf) is int and not -2 ** 63 <= leaf < 2 ** 63)


def _lifted_output(value, what: str) -> Tracer:
    return lax.lift(current_trace(), value, what=what)


# A call in segments returns what its Python computed (a step count, a flag): lifted as an
# operation the call's record keys by its value, so a later call returning the same value
# replays it, where lifting it directly touched the trace's constants and ended the replay
# (the whole call traced again: npbench's channel_flow ran at 0.13x NumPy).
_lifted_output_replayed = replayable_function(_lifted_output)


def _as_output(trace: Trace, leaf: Any, path: str, replayable: bool = False) -> Tracer:
    if isinstance(leaf, Tracer):
        if leaf.trace is not trace:
            raise LeakedTracerError(
                f"output{path} is a traced value from another trace: {leaf.describe()}"
            )
        return leaf
    if isinstance(leaf, (bool, int, float, complex, np.ndarray, np.generic)):
        if replayable and trace.tape is not None and not isinstance(leaf, np.ndarray):
            # (a number: a small key; an array Python made would be keyed by all its bytes,
            # one record node per value it ever had, so it ends the replay as before)
            return _lifted_output_replayed(leaf, f"output{path}")
        return lax.lift(trace, leaf, what=f"output{path}")
    raise UserTypeError(f"jitted function returned output{path} of type {type(leaf).__name__}; "
                    "return arrays, scalars, or tuples/lists/dicts of them")


def check_contiguous(leaves, contiguous, specs) -> None:
    """Each argument a reshape of which the program took as a view (NumPy's view of a
    C-contiguous array) is C-contiguous, before a call that writes into it."""
    for n, where in contiguous:
        leaf = leaves[n]
        if isinstance(leaf, np.ndarray) and not leaf.flags.c_contiguous:
            raise UserValueError(
                f"argument '{specs[n].path}' is not C-contiguous, and the function writes "
                f"into it and uses a reshape of it ({where}): NumPy makes that reshape a view "
                "of a C-contiguous array (it sees the writes) and a copy of another, and "
                "toolkit compiled it as a view. Pass np.ascontiguousarray(...) of it")


def replace_views(results: list, leaves, view_outputs) -> list:
    """``results`` with each output that views an argument (``TracedProgram.view_outputs``) made
    by NumPy of the caller's array (after the call's writes into it, as in NumPy)."""
    for output, argument, steps in view_outputs:
        array = leaves[argument]
        if type(array) is np.ndarray or not steps and isinstance(array, np.generic):
            for step in steps:
                array = step(array)
            results[output] = array
    return results
