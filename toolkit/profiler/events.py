"""Immutable event records, and their versioned JSON form.

Every time is in seconds on the profile's clock (``start``) or seconds elapsed
(``duration``). Schema (``Profile.save``)::

    {"format": "toolkit-profile", "version": 1, "clock": "perf_counter",
     "start": <s>, "end": <s>, "overhead_seconds": <s>,
     "events": [{"type": "<EventClass>", <field>: <value>, ...}, ...]}

Fields are those of the dataclasses below; tuples are JSON lists; nested records (``Phase``,
``Cause``) are objects without a ``type``. Readers ignore unknown fields and reject a newer
``version``."""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

SCHEMA_FORMAT = "toolkit-profile"
SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Phase:
    """One phase of a compilation: trace, passes, codegen, backend_compile, load."""

    name: str
    start: float
    duration: float


@dataclass(frozen=True, slots=True)
class CompileEvent:
    function: str
    location: str  # where the function is defined
    signature: str  # e.g. "x: f32[8,128], n=3"
    backend: str
    compile_id: int
    start: float
    duration: float
    phases: tuple[Phase, ...] = ()
    cache: str = "miss"  # "miss" (compiled) or "persistent_hit" (loaded from disk)
    hlo_fingerprint: str = ""
    call_site: str = ""
    thread: int = 0
    evicted: str = ""  # the signature this compile pushed out of the function's bounded cache
    mutated_arguments: tuple[str, ...] = ()  # arguments the program writes in place (x += y ...)
    # of those, the ones the backend writes straight into the caller's array (no copy back)
    written_in_place: tuple[str, ...] = ()

    @property
    def persistent_cache_hit(self) -> bool:
        return self.cache == "persistent_hit"


@dataclass(frozen=True, slots=True)
class Cause:
    """One difference between a call's signature and the closest earlier one."""

    code: str  # stable: SHAPE, RANK, DTYPE, STATIC_VALUE, SPECIALIZED, ... (frontend.recompile)
    path: str  # the argument and pytree path: x, params['w1'], batch[0]
    old: str
    new: str
    message: str


@dataclass(frozen=True, slots=True)
class RecompileEvent:
    function: str
    location: str
    call_site: str
    compile_id: int
    number: int  # this is the function's number-th compilation (2 = first recompile)
    start: float
    duration: float  # what the miss cost: trace + compile
    causes: tuple[Cause, ...]
    new_signature: str
    closest_signature: str
    other_closest: tuple[str, ...] = ()  # equally close earlier signatures
    avoidable: bool = False  # the traced program equals an earlier one's
    avoidable_reason: str = ""
    suggestions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PassEvent:
    pass_name: str
    compile_id: int
    start: float
    duration: float
    changed: bool
    rewrites: tuple[tuple[str, int], ...] = ()  # (rule, count)


@dataclass(frozen=True, slots=True)
class FusionDecision:
    producer: str
    consumer: str
    fused: bool
    reason: str  # stable code: FUSED, EXPENSIVE_WOULD_DUPLICATE, NOT_FUSIBLE, ...
    message: str
    producer_location: str = ""
    consumer_location: str = ""
    bytes_saved: int = 0
    fusion: str = ""
    compile_id: int = 0
    start: float = 0.0


def _init_through_slots(cls) -> None:
    """Give a frozen, slotted dataclass an ``__init__`` that sets its fields through the slots'
    own setters, with the generated one's signature (``dataclasses.replace`` calls it). The
    generated one calls ``object.__setattr__`` per field: 4.6 us a FusionDecision, of which a
    compile of an unrolled loop makes a hundred thousand."""
    fields = dataclasses.fields(cls)
    scope = {f"_set_{f.name}": cls.__dict__[f.name].__set__ for f in fields}
    scope.update({f"_default_{f.name}": f.default for f in fields
                  if f.default is not dataclasses.MISSING})
    parameters = ", ".join(
        f.name if f.default is dataclasses.MISSING else f"{f.name}=_default_{f.name}"
        for f in fields)
    body = "".join(f"\n    _set_{f.name}(self, {f.name})" for f in fields)
    exec(f"def __init__(self, {parameters}):{body}", scope)  # noqa: S102 - our own field names
    scope["__init__"].__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = scope["__init__"]


_init_through_slots(FusionDecision)


@dataclass(frozen=True, slots=True)
class KernelEvent:
    name: str
    backend: str
    start: float
    duration: float
    device: str = "cpu:0"
    stream: int = 0
    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_accessed: float = 0.0
    launch: str = ""  # "threads=2" or "grid=(64,1,1) block=(256,1,1)"
    compile_id: int = 0
    function: str = ""
    kind: str = ""  # fusion kind (kLoop, kInput, ...) or opcode
    source: str = ""  # user's source line(s)
    # "forward" or "backward" in a program made by differentiation (tk.grad, tk.vjp): a kernel
    # computing any backward instruction ('transpose(jvp(...))') is backward; "" otherwise
    phase: str = ""


@dataclass(frozen=True, slots=True)
class TransferEvent:
    direction: str  # host_to_device | device_to_host | device_to_device
    bytes: int
    start: float
    duration: float
    what: str = ""  # the argument or result: "x", "result[0]"
    location: str = ""  # the user's line that caused it
    device: str = ""
    stream: int = 0
    function: str = ""
    avoidable: str = ""  # why this copy need not happen (a round trip through the host), or ""


@dataclass(frozen=True, slots=True)
class AllocationEvent:
    start: float
    bytes: int  # positive: allocated; negative: freed
    live_bytes: int
    device: str = "cpu:0"
    what: str = ""


@dataclass(frozen=True, slots=True)
class DispatchEvent:
    """One call of a jitted function on the host: argument checks, cache lookup, launch."""

    function: str
    start: float
    duration: float
    cache_hit: bool
    compile_id: int
    thread: int = 0


@dataclass(frozen=True, slots=True)
class PromotionEvent:
    """A NumPy scalar that made a narrower float program wider from one line on (NEP 50: a
    NumPy float64 scalar is not weak, unlike a Python float), with what it turned wider."""

    function: str
    location: str  # the line that promoted
    what: str  # "np.true_divide with the NumPy scalar np.float64(8.0)"
    from_dtype: str
    to_dtype: str
    dots: int  # dots computed in to_dtype because of it
    total_dots: int  # dots in the program
    operations: int  # other operations computed in to_dtype because of it
    start: float = 0.0

    @property
    def message(self) -> str:
        return (f"{self.location}: {self.what} makes {self.from_dtype} values {self.to_dtype} "
                f"from this line on (NumPy 2, NEP 50): {self.dots} of {self.total_dots} dots and "
                f"{self.operations} other operations run in {self.to_dtype}, about twice the "
                f"time and memory traffic of {self.from_dtype}. Fix: wrap the scalar in float(...) "
                f"(a Python float is weak and keeps {self.from_dtype}), or .astype the result")



# a GraphBreakEvent's reason for a call of a signature that runs as plain NumPy
# (jitting.eager): the whole call is glue, and no segment ran
PLAIN_NUMPY = "plain NumPy"


@dataclass(frozen=True, slots=True)
class GraphBreakEvent:
    """One segment of a jitted function with graph breaks, run: the Python glue before it
    (``glue`` seconds, ending at ``start``) and the compiled segment (``duration``), which ends
    where Python needed a value (``reason`` at ``location``) or at the function's return."""

    function: str
    reason: str  # "bool()", "x[mask]" ..., or "return" for the last segment
    location: str  # the user's line that needed the value ("" for the return)
    start: float
    duration: float
    glue: float
    instructions: int
    compiled: bool  # the segment compiled in this call (a new one, or a guard failed)
    thread: int = 0


@dataclass(frozen=True, slots=True)
class CollectiveEvent:
    """One device's part in one collective of an SPMD run (``tk.shard_map``): ``wait`` seconds
    from its arrival until the last device of its group arrived (``last``: the straggler), then
    ``duration`` seconds to its result. Bandwidths by nccl-tests' formulas over ``duration``:
    ``algbw`` = ``bytes`` (nccl-tests' S) / time, ``busbw`` = ``algbw`` x 2(n-1)/n for an
    all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for a permute."""

    function: str
    op: str  # all-reduce, all-gather, ...
    name: str  # the instruction
    device: int
    group: tuple[int, ...]
    bytes: int
    start: float  # when this device arrived
    wait: float
    duration: float
    algbw: float  # bytes per second
    busbw: float
    last: int
    thread: int = 0
    sequence: int = 0  # the device's n-th collective of the call: the same n meets on every device


EVENT_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    CompileEvent, RecompileEvent, PassEvent, FusionDecision, KernelEvent, TransferEvent,
    AllocationEvent, DispatchEvent, PromotionEvent, GraphBreakEvent, CollectiveEvent)}
_NESTED = {"Phase": Phase, "Cause": Cause}


def event_to_dict(event) -> dict:
    out = {"type": type(event).__name__}
    for f in dataclasses.fields(event):
        out[f.name] = _plain(getattr(event, f.name))
    return out


def _plain(value):
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def event_from_dict(data: dict):
    cls = EVENT_TYPES.get(data.get("type"))
    if cls is None:
        raise ValueError(f"unknown event type {data.get('type')!r}")
    return _build(cls, data)


def _build(cls, data: dict):
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _typed(hints[f.name], data[f.name])
    return cls(**kwargs)


def _typed(hint, value):
    origin = typing.get_origin(hint)
    if origin is tuple:
        args = typing.get_args(hint)
        inner = args[0] if args else None
        return tuple(_typed(inner, v) for v in value) if inner is not None else tuple(value)
    if isinstance(hint, type) and hint.__name__ in _NESTED and isinstance(value, dict):
        return _build(_NESTED[hint.__name__], value)
    if hint is float and isinstance(value, int):
        return float(value)
    return value


__all__ = [*EVENT_TYPES, "Phase", "Cause", "event_to_dict", "event_from_dict", "field"]
