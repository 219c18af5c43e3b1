"""Replay of a recorded trace: the cache-hit path of a jitted function that breaks its graph.

A function that breaks its graph runs its Python again on every call (its glue, its side
effects, as NumPy would), and each array operation it makes used to be traced again: tens of
microseconds an operation, where the compiled segments cost a few. As PyTorch/XLA's LazyTensor
finds its graphs by the sequence of operations that built them, toolkit records each call's
operations in a trie. An operation's key is what it was asked: the function, the user's line,
and every argument (a traced value by the order it was made in the call, a Python number by its
type and exact bits, a NumPy array by its dtype, shape and bytes). A node keeps what the
operation produced (tracers of the recorded instructions) and what it changed (a write into an
array, through its views), and a break's node keeps the compiled segment it ran.

A later call that asks the same things walks the trie: each operation hands back tracers of the
recorded instructions without tracing, and each break runs its recorded segment with the call's
values. The first operation asked differently ends the walk (the *divergence*): the trace is
rebuilt as it stood after the last matching node, from the recorded instructions, and tracing
goes on as usual, recording a new branch. The guards are exact: a node is followed only when
every input of the operation is the same, so a followed node produces what tracing would.

What the walk cannot vouch for ends it too: an argument it cannot key (a user's function, an
object of a type it does not know, a traced value made outside the recorded operations), an
error, a nested trace (a loop body, a branch: ``stop``), or toolkit code that builds
instructions itself. While a call replays, the trace's builder and the lists its operations
append to are placeholders (``_Pending``) that diverge when touched, so that code sees the
real ones, rebuilt."""
from __future__ import annotations

import functools
import sys
import weakref
from typing import Any, Callable

import numpy as np

from ..ir.builder import ComputationBuilder, ModuleBuilder
from ..ir.user_code import user_frame
from .tracer import Trace, Tracer, current_trace, replayed_tracer
from .views import DerivedView

NODES_LIMIT = 20_000  # nodes of one trie (one signature); past it, calls stop recording


class Unkeyable(Exception):
    """An argument or result the trie cannot key or rebuild: recording stops there."""


class Node:
    """One recorded step: an operation (``template``, ``effects``, ``bindings``), a break or
    the return (``run``, the jit layer's record of the segment it ran); ``state`` is the trace
    as it stood after the step, to rebuild it from at a divergence."""

    # keep: what the node's key names by identity (a code object, instructions), kept alive so
    # that no other object can take its id while the node is there
    # end: why a recording stopped after this node (a later call's replay ends here for it)
    # plain: the template of an operation that makes one new value and nothing else (most
    # operations), else None: a replay hands back a new tracer of it without more ado
    # last: the child the walk took from here most recently (the one a replay most likely
    # takes next); op: a binary operation's key flattened, (fn, id(code), lasti, slot, the other
    # operand's kind, its slot or value), which a replay compares without hashing a key
    __slots__ = ("children", "template", "effects", "bindings", "state", "run", "keep", "end",
                 "plain", "last", "op", "__weakref__")

    def __init__(self, state, template=None, effects=(), bindings=(), run=None):
        self.children: dict = {}
        self.template = template
        self.effects = effects
        self.bindings = bindings
        self.state = state
        self.run = run
        self.keep = None
        self.end = None
        self.plain = template if template is not None and template[0] == 1 and run is None \
            and not effects and not bindings else None
        self.last = self.op = None


class Root(Node):
    """The trie of one signature: the parameters (instruction, weak type, origin) and the
    nodes' count."""

    __slots__ = ("parameters", "size")

    def __init__(self, state, parameters):
        super().__init__(state)
        self.parameters = parameters
        self.size = 1


# ---- keys --------------------------------------------------------------------------------
def _numpy_callable(v) -> bool:
    """NumPy's own functions (pure): keyed by identity. A user's function is not (what it
    does may change between calls)."""
    return isinstance(v, np.ufunc) or (getattr(v, "__module__", None) or "").startswith("numpy")


def key_of(v, trace: Trace):
    t = type(v)
    if t is Tracer:
        if v._trace is not trace or v._slot < 0:
            raise Unkeyable("a traced value made outside the recorded operations")
        return v._slot
    if t is float:  # by its bits: -0.0 is not 0.0, and NaN is NaN (other floats: equal values
        return (float, v) if v and v == v else (float, v.hex())  # are equal bits)
    if t is int or t is bool or t is str:
        return (t, v)
    if v is None or v is Ellipsis:
        return v
    if t is tuple or t is list:
        return (t, tuple([key_of(x, trace) for x in v]))
    if t is slice:
        return (slice, key_of(v.start, trace), key_of(v.stop, trace), key_of(v.step, trace))
    if t is np.ndarray:
        if v.dtype.hasobject:
            raise Unkeyable("an array of Python objects")
        return (np.ndarray, v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, np.generic):
        if isinstance(v, np.object_):
            raise Unkeyable("a NumPy object scalar")
        return (t, v.tobytes())
    if t is complex:
        return (complex, v.real.hex(), v.imag.hex())
    if isinstance(v, np.dtype):
        return (np.dtype, v)
    if isinstance(v, tuple):  # a named tuple
        return (t, tuple([key_of(x, trace) for x in v]))
    if t is dict:
        return (dict, tuple([(k, key_of(x, trace)) for k, x in v.items()]))
    if t is DerivedView:  # (how a reshape's view follows its parent: by the call's arguments)
        if v.key is None:
            raise Unkeyable("a view made with arguments that cannot be recorded")
        return (DerivedView, v.key)
    if isinstance(v, type):  # np.float32, float, the types of __array_function__
        return (type, v)
    if _numpy_callable(v):
        return (Callable, v)
    raise Unkeyable(f"an argument of type {t.__name__} (what it holds may change between calls)"
                    if not callable(v) else
                    f"a function of the user's, {getattr(v, '__name__', t.__name__)} (what it "
                    "does may change between calls)")


# ---- the walk ------------------------------------------------------------------------------
class _Pending:
    """Stands for one of the trace's building attributes (the module, the builder, the checks
    ...) while a call replays: touching it diverges, which puts the real one in its place."""

    __slots__ = ("_tape", "_attr")

    def __init__(self, tape: "Tape", attr: str):
        self._tape = tape
        self._attr = attr

    def _real(self):
        self._tape.diverge("toolkit code that builds instructions itself (a toolkit function "
                           "called directly, a result that is not a traced array)")
        return getattr(self._tape.trace, self._attr)

    def __getattr__(self, name):
        return getattr(self._real(), name)

    def __len__(self):
        return len(self._real())

    def __iter__(self):
        return iter(self._real())

    def __bool__(self):
        return bool(self._real())

    def __contains__(self, item):
        return item in self._real()

    def __getitem__(self, item):
        return self._real()[item]

    def __setitem__(self, item, value):
        self._real()[item] = value


_BUILDING = ("module", "builder", "checks", "promotions", "int_limits", "_constants")


class Tape:
    """One call's walk along a trie: replaying (following recorded nodes) until it diverges,
    then recording (adding nodes), until it stops. ``trace.tape`` is this tape while the
    walk is at the top level; None inside a recorded operation and once stopped."""

    def __init__(self, trace: Trace, root: Root, replaying: bool, owner=None):
        self.trace = trace
        self.root = root
        self.node: Node = root
        self.replaying = replaying
        self.stopped = False
        self.why: tuple[str, str] | None = None  # (reason, file:line) the walk first ended
        self.owner = owner  # the jit layer's breaker, which binds values to parameters
        self.objects: list[weakref.ref] = []  # slot -> the tracer made at that step
        self.touched: list[Tracer] = []  # tracers an operation changed (inplace, views)
        self.bindings: list[tuple] = []  # parameters an operation bound (host arrays)
        # the breaks inside the operation being recorded: (the jit layer's record of its
        # segment, the value it gave, the instructions it moved on from), in order
        self.inner: list[tuple] = []
        trace.tape = self
        self._pending: list[_Pending] = []
        if replaying:
            for attr in _BUILDING:
                pending = _Pending(self, attr)
                self._pending.append(pending)
                setattr(trace, attr, pending)

    def close(self) -> None:
        """The call is over: untie the tape from the trace and the breaker (no cycles)."""
        for pending in self._pending:
            pending._tape = None
        self._pending = []
        self.trace = self.owner = None

    # ---- slots -----------------------------------------------------------------------------
    def adopt(self, t: Tracer) -> None:
        t._slot = len(self.objects)
        self.objects.append(weakref.ref(t))

    # ---- state -----------------------------------------------------------------------------
    def state(self) -> tuple:
        """The trace's building state now, to rebuild it from (lengths of what only grows)."""
        trace = self.trace
        checks = tuple((f.inst, e, m) for f, e, m in trace.checks) if trace.checks else ()
        promotions = (tuple((loc, what, n, w, t.inst) for loc, what, n, w, t in trace.promotions)
                      if trace.promotions else ())
        return (trace.module, trace.builder, len(trace.builder._instructions),
                len(trace.module._computations), checks, promotions,
                dict(trace.int_limits) if trace.int_limits else None)

    def _note(self, reason: str) -> None:
        """Remember why and where the walk first ended (the report shows it)."""
        if self.why is None:
            frame = user_frame(3)
            where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else ""
            self.why = (reason, where)

    def diverge(self, reason: str = "") -> None:
        """Stop replaying: the trace's building state becomes the recorded one at this node,
        rebuilt, and tracing goes on for real (recording)."""
        if not self.replaying:
            return
        # (where a recording stopped, its reason says more than what the replay met there)
        self._note(self.node.end or reason or "Python asked for something else here than "
                   "when recorded")
        self.replaying = False
        module, builder, n_inst, n_comp, checks, promotions, limits = self.node.state
        trace = self.trace
        m = ModuleBuilder.__new__(ModuleBuilder)
        m.name, m.uniquer = module.name, module.uniquer.copy()
        m._computations = module._computations[:n_comp]
        kept = {id(c) for c in m._computations}
        m._reducers = {k: c for k, c in module._reducers.items() if id(c) in kept}
        b = ComputationBuilder(builder.name, m.uniquer)
        b._instructions = builder._instructions[:n_inst]
        present = {id(i) for i in b._instructions}
        b._parameters = {n: p for n, p in builder._parameters.items() if id(p) in present}
        constants = {}
        for inst in b._instructions:
            if inst.opcode == "constant":
                literal = inst.attrs["literal"]
                if literal.size <= 16:
                    constants[(literal.dtype.str, literal.shape, literal.tobytes())] = inst
        trace.module, trace.builder, trace._constants = m, b, constants
        trace.checks = [(Tracer(trace, inst), e, msg) for inst, e, msg in checks]
        trace.promotions = [(loc, what, n, w, Tracer(trace, inst))
                            for loc, what, n, w, inst in promotions]
        trace.int_limits = dict(limits or {})

    def stop(self, reason: str = "") -> None:
        """No more replaying or recording in this call (the trace is real from here on)."""
        if self.stopped:
            return
        if not self.replaying and reason and self.node.end is None:
            self.node.end = reason  # (what comes next was not recorded: later replays end here)
        self.diverge(reason)
        if reason:
            self._note(reason)
        self.stopped = True
        self.trace.tape = None
        self.trace._tape_in_op = None

    # ---- nodes -------------------------------------------------------------------------------
    def follow(self, key) -> Node | None:
        """The recorded node for ``key`` while replaying (stepping onto it); None after
        diverging here."""
        node = self.node.children.get(key) if key is not None else None
        if node is not None:
            self.node = node
            return node
        self.diverge("the function returned other values than when recorded")
        return None

    def record(self, key, node: Node) -> bool:
        """Add ``node`` under the current one (False, and stop, when it cannot be)."""
        if key is None or self.stopped or self.root.size >= NODES_LIMIT:
            self.stop("a break on a value made outside the recorded operations" if key is None
                      else f"the record of this signature is full ({NODES_LIMIT} steps)")
            return False
        self.node.children[key] = self.node.last = node
        self.node = node
        self.root.size += 1
        if type(key) is tuple and len(key) == 5 and key[4] is None and len(key[3]) == 2 \
                and type(key[3][0]) is int:  # (a binary operation on a recorded value)
            other = key[3][1]
            node.op = key[:3] + ((key[3][0], Tracer, other) if type(other) is int else
                                 (key[3][0], *other))
        return True

    # ---- operations --------------------------------------------------------------------------
    def operation(self, fn, args: tuple, kwargs: dict, frame):
        """``fn(*args, **kwargs)``, an operation the user's code asked for: replayed from the
        trie when recorded, else run and recorded."""
        trace = self.trace
        unkeyable = ""
        try:
            if len(args) == 2:  # (a binary operator on a traced value: most operations)
                a, b = args
                keys = (a._slot if type(a) is Tracer and a._trace is trace and a._slot >= 0
                        else key_of(a, trace),
                        b._slot if type(b) is Tracer and b._trace is trace and b._slot >= 0
                        else key_of(b, trace))
            else:
                keys = tuple([key_of(a, trace) for a in args])
            # (the code object by identity, kept alive by the node: its hash reads its bytes)
            key = (fn, id(frame.f_code), frame.f_lasti, keys,
                   key_of(kwargs, trace) if kwargs else None)
        except Unkeyable as e:
            key, unkeyable = None, str(e)
        if self.replaying:
            node = self.node.children.get(key) if key is not None else None
            if node is not None:
                if node.run is not None:  # an operation with a break inside (x[mask])
                    after = self.owner.replay_inner_breaks(node)
                    if after is not None:
                        self.node = after
                        return self._replay(after)
                    self.diverge("a break inside an operation gave a value not recorded")
                else:
                    self.node = node
                    plain = node.plain
                    if plain is not None:  # (usually)
                        return replayed_tracer(trace, plain[1], plain[2], plain[3],
                                               self.objects, plain[4])
                    return self._replay(node)
            elif key is not None:
                self.diverge(self.node.end or "Python asked for an operation not recorded here "
                             "(another branch, other values)")
        if key is None:
            self.stop(unkeyable)
            return fn(*args, **kwargs)
        trace.tape, trace._tape_in_op = None, self
        self.touched, self.bindings, self.inner = [], [], []
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            self.stop("an operation raised an error")
            raise
        if self.stopped:  # (a break inside the operation, a nested trace)
            return result
        trace.tape, trace._tape_in_op = self, None
        try:
            new: list[Tracer] = []
            template = self._template(result, new)
            effects = self._effects([t for t in new if t._view is not None or t._views is not None
                                     or t._alias_of is not None] + self.touched)
        except Unkeyable as e:
            self.stop(f"a result that cannot be recorded: {e}")
            return result
        node = Node(self.state(), template, effects, tuple(self.bindings))
        node.keep = frame.f_code  # (its id is in the key)
        if not self.inner:
            self.record(key, node)
            return result
        # breaks inside the operation: a node holding each break's segment, the next under the
        # previous by the value the operation received, and the rest of the operation (this
        # node) under the last (never diverged from: the walk is inside an operation)
        inner, self.inner = self.inner, []
        for run, value_key, moved_from in inner:
            broke = Node(None, run=run)
            broke.keep = (frame.f_code, moved_from)
            if not self.record(key, broke):
                return result
            key = value_key
        self.record(key, node)
        return result

    def _template(self, v, new: list):
        t = type(v)
        if t is Tracer:
            if v._trace is not self.trace:
                raise Unkeyable("a traced value of another trace")
            if v._slot >= 0:
                return (0, v._slot)
            self.adopt(v)
            new.append(v)
            return (1, v.inst, v.weak_type, v._origin, v._scalar)
        if t is tuple or t is list or isinstance(v, tuple):
            return (2, t, tuple([self._template(x, new) for x in v]))
        if v is None or v is NotImplemented or t in (bool, int, float, complex, str) or \
                isinstance(v, (np.generic, np.dtype)):  # (NotImplemented: ``s += 1`` on a
            return (3, v)  # scalar, which Python then runs as ``s = s + 1``)
        if t is np.ndarray:
            return (4, v.copy())
        raise Unkeyable(f"a value of type {t.__name__}")

    def _effects(self, tracers: list[Tracer]) -> tuple:
        effects, seen = [], set()
        for t in tracers:
            if id(t) in seen or t._slot < 0 or t._trace is not self.trace:
                continue  # (a temporary of the operation: nobody can reach it)
            seen.add(id(t))
            view = None
            if t._view is not None:
                parent, index = t._view
                if parent._slot < 0:
                    raise Unkeyable("a view of a value made outside the recorded operations")
                key_of(index, self.trace)  # a basic index of Python values (and traced ones)
                # (traced bounds by their slots: the node must not keep this call's tracers
                # alive, each of which would cross every later break of the call)
                view = (parent._slot, _index_template(index))
            views = None
            if t._views is not None:
                views = tuple(v._slot for v in (r() for r in t._views)
                              if v is not None and v._slot >= 0)
            effects.append((t._slot, t.inst, t.weak_type, t._alias_of, view, views))
        return tuple(effects)

    def _replay(self, node: Node):
        result = self._build(node.template)
        objects = self.objects
        for slot, inst, weak, alias, view, views in node.effects:
            t = objects[slot]()
            if t is None:
                continue
            t.inst, t.weak_type, t._alias_of = inst, weak, alias
            t._view = None if view is None else (objects[view[0]](),
                                                 _index_build(view[1], objects))
            if views is None:
                t._views = None
            else:
                t._views = [objects[s] for s in views if objects[s]() is not None] or None
        if node.bindings:
            bound = self.owner.bound
            for inst, value in node.bindings:
                bound[id(inst)] = (inst, value)
        return result

    def _build(self, template):
        kind = template[0]
        if kind == 1:
            return replayed_tracer(self.trace, template[1], template[2], template[3],
                                   self.objects, template[4])
        if kind == 0:
            return self.objects[template[1]]()
        if kind == 3:
            return template[1]
        if kind == 2:
            cls, items = template[1], [self._build(x) for x in template[2]]
            if cls is tuple or cls is list:
                return cls(items)
            return cls(*items)  # a named tuple
        return template[1].copy()


class _Slot:
    """A traced value inside a recorded view's index, by its slot in the call."""

    __slots__ = ("slot",)

    def __init__(self, slot: int):
        self.slot = slot


def _index_template(index):
    """A view's index with each traced value as its slot (it was keyed, so each has one)."""
    t = type(index)
    if t is Tracer:
        return _Slot(index._slot)
    if t is tuple or t is list:
        return t(_index_template(k) for k in index)
    if t is slice:
        return slice(_index_template(index.start), _index_template(index.stop),
                     _index_template(index.step))
    return index


def _index_build(template, objects: list):
    """The index of ``_index_template`` with this call's tracers at their slots."""
    t = type(template)
    if t is _Slot:
        return objects[template.slot]()
    if t is tuple or t is list:
        return t(_index_build(k, objects) for k in template)
    if t is slice:
        return slice(_index_build(template.start, objects), _index_build(template.stop, objects),
                     _index_build(template.step, objects))
    return template


# ---- where operations enter ----------------------------------------------------------------
def replayable_method(fn: Callable) -> Callable:
    """``fn(tracer, ...)`` as a method of ``Tracer`` that the tape records and replays."""

    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        tape = self._trace.tape
        if tape is None:
            return fn(self, *args, **kwargs)
        if tape.replaying and len(args) == 1 and not kwargs and self._slot >= 0:
            # (most replayed operations: a recorded value and another, or a Python number,
            # giving one new value: Tape.operation's key and its replay, without its frame)
            other = args[0]
            kind = type(other)
            if kind is Tracer:
                other_key = other._slot if other._trace is self._trace else -1
            elif kind is float:  # (0.0 and NaN are keyed by their bits: Tape.operation's)
                other_key = (float, other) if other and other == other else -1
            elif kind is int:
                other_key = (int, other)
            else:
                other_key = -1
            if other_key != -1:
                frame = sys._getframe(1)
                here = tape.node
                node = here.last  # (the step taken last time, compared rather than hashed)
                op = node.op if node is not None else None
                if op is None or op[0] is not fn or op[1] != id(frame.f_code) or \
                        op[2] != frame.f_lasti or op[3] != self._slot or \
                        op[4] is not kind or op[5] != (other_key if kind is Tracer else other):
                    node = here.children.get(
                        (fn, id(frame.f_code), frame.f_lasti, (self._slot, other_key), None))
                    if node is not None:
                        here.last = node
                if node is not None:
                    plain = node.plain
                    if plain is not None:
                        tape.node = node
                        return replayed_tracer(tape.trace, plain[1], plain[2], plain[3],
                                               tape.objects, plain[4])
        return tape.operation(fn, (self,) + args, kwargs, sys._getframe(1))

    return method


def replayable_function(fn: Callable) -> Callable:
    """``fn`` (a buffer function: ``np.zeros(shape)`` sees no tracer) recorded and replayed
    in the current trace."""

    @functools.wraps(fn)
    def function(*args, **kwargs):
        trace = current_trace()
        tape = trace.tape if trace is not None else None
        if tape is None:
            return fn(*args, **kwargs)
        return tape.operation(fn, args, kwargs, sys._getframe(1))

    return function


def instrument(cls: type, names) -> None:
    """Make the operations ``names`` of ``cls`` (methods and properties) replayable."""
    for name in names:
        value = cls.__dict__[name]
        if isinstance(value, property):
            setattr(cls, name, property(
                replayable_method(value.fget) if value.fget else None,
                replayable_method(value.fset) if value.fset else None, None, value.__doc__))
        elif callable(value) and not isinstance(value, type):
            setattr(cls, name, replayable_method(value))


def start(trace: Trace, owner, root: Root | None, make_parameters: Callable[[], list[Tracer]]
          ) -> tuple[list[Tracer], Root]:
    """Begin a call's walk: with a recorded ``root``, the parameters are tracers of its
    instructions and the call replays; without, they are made (``make_parameters``) and a new
    trie is recorded. The parameters, and the root."""
    if root is not None:
        tape = Tape(trace, root, True, owner)
        params = [replayed_tracer(trace, inst, weak, origin, tape.objects)
                  for inst, weak, origin in root.parameters]
        trace.parameters = list(params)
        return params, root
    params = make_parameters()
    root = Root(None, [(t.inst, t.weak_type, t._origin) for t in params])
    tape = Tape(trace, root, False, owner)
    root.state = tape.state()
    for t in params:
        tape.adopt(t)
    return params, root


__all__ = ["Node", "Root", "Tape", "Unkeyable", "key_of", "replayable_method",
           "replayable_function", "instrument", "start", "Any"]
