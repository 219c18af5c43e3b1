"""``tk.shard_map(f, mesh, in_specs, out_specs)``, with JAX's semantics, on host devices.

Each argument is split into per-device blocks by its ``in_specs`` entry (a mesh axis named for
a dimension splits it; an axis not named replicates it). ``f`` is traced once on a block's
shapes, its collectives (``tk.lax.psum`` ...) naming mesh axes, and compiled once. Then every
device runs the program on its blocks, one thread per device of this process (XLA's host
platform with a forced device count), the collectives meeting in shared memory
(``ir/collectives.py``). The outputs are assembled by ``out_specs``: blocks concatenated along
the dimensions that name an axis. An axis an output's spec leaves out is a promise that the
devices along it computed the same value (JAX's): with ``check_vma=True`` (the default) the
varying/invariant typing must prove it while tracing, or the function is refused with JAX's
message; with ``check_vma=False`` toolkit checks the promise on the values, every call, and
raises, naming the devices, where it does not hold.

On the CPU backend the collectives run between the compiled kernels, on each device's thread;
the GPU backend does not compile them yet (it says so, naming the op)."""
from __future__ import annotations

import math
import threading
from typing import Callable, NamedTuple, Sequence

import numpy as np

from . import distributed
from .backends import get_backend
from .backends.blas_threads import blas_threads
from .backends.cpu.executor import available_cores, kernel_threads
from .config import env_int
from .frontend.collectives import Mesh, P, mesh_context
from .frontend.tracer import Tracer
from .frontend.vma import VaryingAxes, typing_context
from .profiler.events import CollectiveEvent
from .profiler.recorder import RECORDER
from .ir.collectives import (DEFAULT_TIMEOUT_S, CollectiveError, DeviceRun, algorithm_bytes,
                             bus_bandwidth_factor, on_device, run_devices)
from .ir.ops import GroupOp
from .stages import lower_positional


def shard_map(f: Callable, mesh: Mesh, in_specs, out_specs, *, backend: str | None = None,
              timeout: float | None = None, check_vma: bool = True) -> Callable:
    """``f`` run on every device of ``mesh`` over its blocks of the arguments (see the module
    docstring). ``in_specs``: one ``tk.P`` per positional argument (or one for all);
    ``out_specs``: one per output (a tuple when ``f`` returns a tuple). ``check_vma`` (JAX's
    default, True): derivatives follow JAX's varying/invariant typing (``frontend/vma.py``:
    the gradient of a loss with respect to a replicated argument is summed over the devices,
    ``psum`` transposes to the identity); False: pmap's (``psum`` transposes to ``psum``)."""
    if not isinstance(mesh, Mesh):
        raise TypeError(f"shard_map: mesh must be a tk.Mesh, got {type(mesh).__name__}")
    name = getattr(f, "__name__", "f")
    programs: dict[tuple, object] = {}

    varying: list = []  # per output of the program traced last: the axes it varies along
    arg_names = _parameter_names(f)

    def traced(*blocks):
        typing = VaryingAxes(mesh) if check_vma else None
        with mesh_context(mesh), typing_context(typing):
            if typing is not None:  # each block varies along the axes its spec names
                specs = _per_argument(in_specs, len(blocks), "in_specs")
                for block, spec in zip(blocks, specs):
                    typing.seed(block, [a for d in range(len(spec)) for a in spec.axes(d)])
            out = f(*blocks)
            outs = out if isinstance(out, tuple) else (out,)
            varying[:] = [typing.of(o) if typing is not None and isinstance(o, Tracer)
                          else None for o in outs]
            if typing is not None:
                _check_replication(name, mesh, outs, varying, out_specs, isinstance(out, tuple))
            return out
    traced.__name__ = traced.__qualname__ = name

    def run(*args):
        specs = _per_argument(in_specs, len(args), "in_specs")
        arrays = [np.asarray(a) for a in args]
        for k, (a, spec) in enumerate(zip(arrays, specs)):
            _check_spec(spec, a.ndim, mesh, f"argument {k} of {name}", a.shape)
        blocks = [[_block(a, spec, mesh, d) for a, spec in zip(arrays, specs)]
                  for d in range(mesh.size)]
        key = tuple((b.shape, b.dtype.str) for b in blocks[0])
        compiled = programs.get(key)
        if compiled is None:
            compiled = programs[key] = _compile(traced, blocks[0], backend, arg_names)._replace(
                varying=tuple(varying))
        if distributed.is_initialized():  # the ranks must run one program
            signature = ", ".join(f"argument {k}: {a.dtype}{list(a.shape)}"
                                  for k, a in enumerate(arrays))
            distributed.agree_on_program(name, signature, compiled.text,
                                         _timeout(_distributed_timeout(timeout)))
        outs = _run_devices(compiled.compiled, compiled.has_collectives, blocks, mesh, timeout,
                            name)
        single = not isinstance(outs[0], tuple)
        per_device = [(o,) if single else o for o in outs]
        specs_out = _per_argument(out_specs if not single else (out_specs,),
                                  len(per_device[0]), "out_specs")
        proven = compiled.varying
        results = tuple(_assemble([p[k] for p in per_device], spec, mesh, f"output {k} of {name}",
                                  proven[k] if k < len(proven) else None)
                        for k, spec in enumerate(specs_out))
        return results[0] if single else results

    run.__name__ = name
    run.__wrapped__ = f
    # the per-device programs compiled so far, by block signature (the dashboard's IR tab)
    run.compiled_programs = lambda: [entry.compiled for entry in programs.values()]
    return run


def _check_replication(name: str, mesh: Mesh, outs, varying, out_specs, many: bool) -> None:
    """JAX's check (``check_vma=True``): an output's spec that leaves out a mesh axis promises
    the devices along it hold the same value, which the typing must prove; an output that
    varies along such an axis is refused as JAX refuses it, before anything runs."""
    specs = _per_argument(out_specs if many else (out_specs,), len(outs), "out_specs")
    for k, (spec, vary) in enumerate(zip(specs, varying)):
        if vary is None:  # (a constant, a NumPy value: the same on every device)
            continue
        named = {a for d in range(len(spec)) for a in spec.axes(d)}
        promised = [a for a in mesh.axis_names if a not in named]
        unproven = [a for a in promised if a in vary]
        if not unproven:
            continue
        proven = [a for a in mesh.axis_names if a not in vary]
        inferred = (f"could only infer replication over {proven}" if proven else
                    "could not infer replication over any axes")
        which = f"output {k} " if many else ""
        raise ValueError(
            f"shard_map applied to the function {name!r} was given out_specs which require "
            "replication which can't be statically inferred given the mesh:\n\n"
            f"The mesh given has shape {tuple(mesh.shape[a] for a in mesh.axis_names)} with "
            f"corresponding axis names {tuple(mesh.axis_names)}.\n\n"
            f"out_specs {which}is {spec!r} which implies that the corresponding output value is "
            f"replicated across mesh axis {unproven[0]!r}, but {inferred}\n\n"
            "Check if these output values are meant to be replicated over those mesh axes. If "
            "not, consider revising the corresponding out_specs entries (or reduce over the "
            "axis: tk.lax.psum, pmean). If so, consider disabling the check by passing the "
            "check_vma=False argument to `tk.shard_map` (the promise is then checked on the "
            "values, every call).")


def _parameter_names(f) -> list[str]:
    import inspect

    try:
        return [p.name for p in inspect.signature(f).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _per_argument(specs, count: int, what: str) -> list[P]:
    if isinstance(specs, P) or specs is None:
        return [specs or P()] * count
    specs = list(specs)
    if len(specs) != count:
        raise ValueError(f"shard_map: {what} has {len(specs)} entries for {count} values")
    return [s if s is not None else P() for s in specs]


def _check_spec(spec: P, ndim: int, mesh: Mesh, what: str, shape) -> None:
    if len(spec) > ndim:
        raise ValueError(f"shard_map: {what} has {ndim} dimensions but its spec {spec!r} names "
                         f"{len(spec)}")
    named: list[str] = []
    for d in range(len(spec)):
        for axis in spec.axes(d):
            if axis not in mesh.shape:
                raise ValueError(f"shard_map: {what}: spec {spec!r} names axis {axis!r}, which "
                                 f"the mesh {mesh!r} does not have")
            named.append(axis)
        n = math.prod(mesh.shape[a] for a in spec.axes(d))
        if shape is not None and shape[d] % n:
            raise ValueError(f"shard_map: dimension {d} of {what} (shape {tuple(shape)}) does "
                             f"not split into {n} equal blocks over {spec.axes(d)}")
    if len(set(named)) != len(named):
        raise ValueError(f"shard_map: {what}: spec {spec!r} names an axis twice")


def _block_index(spec: P, mesh: Mesh, device: int, shape) -> tuple[slice, ...]:
    at = mesh.coordinates(device)
    index = []
    for d, size in enumerate(shape):
        axes = spec.axes(d)
        if not axes:
            index.append(slice(None))
            continue
        n = math.prod(mesh.shape[a] for a in axes)
        k = 0
        for a in axes:  # the first named axis is the major one, as JAX's
            k = k * mesh.shape[a] + at[a]
        block = size // n
        index.append(slice(k * block, (k + 1) * block))
    return tuple(index)


def _block(array: np.ndarray, spec: P, mesh: Mesh, device: int) -> np.ndarray:
    return np.ascontiguousarray(array[_block_index(spec, mesh, device, array.shape)])


class _Program(NamedTuple):
    """One compiled per-device program of a shard_map, and what its calls need to know."""
    compiled: object
    has_collectives: bool  # (without any, the devices run one after another on this thread)
    text: str  # what MPI ranks compare (only where there are ranks)
    varying: tuple = ()  # per output: the axes the typing found it varies along (None: unknown)


def _compile(traced, blocks, backend, names: Sequence[str] = ()) -> _Program:
    lowered = lower_positional(traced, traced.__name__, tuple(blocks), get_backend(backend))
    written = [names[k] if k < len(names) else lowered.in_specs[k].path
               for k in lowered._program.mutated]
    if written:  # (every device would write its own block's value into the one array)
        raise ValueError(
            f"shard_map: {traced.__name__} writes its argument(s) {', '.join(written)} in place; "
            "each device holds its own block of an argument, so there is no one array to "
            "write: return the new value instead (as JAX's arrays, which cannot be written)")
    has_collectives = any(i.opcode in GroupOp.COLLECTIVE
                          for c in lowered.hlo.computations for i in c.instructions)
    # (the traced program's text, which the ranks compare, only where there are ranks)
    text = (lowered.hlo.to_text(metadata=False, digest_literals=True)
            if distributed.is_initialized() else "")
    return _Program(lowered.compile(), has_collectives, text)


class _DeviceThreads:
    """Threads that stay for the devices after the first (the calling thread is device 0):
    starting threads costs more than a small program's whole run. One SPMD call at a time uses
    them, since every device of a call must run at once for its collectives to meet."""

    _pools: dict[int, "_DeviceThreads"] = {}
    _pools_lock = threading.Lock()

    def __init__(self, count: int):
        from concurrent.futures import ThreadPoolExecutor

        self.executor = ThreadPoolExecutor(max_workers=count, thread_name_prefix="toolkit-device")
        self.lock = threading.Lock()

    @classmethod
    def for_devices(cls, devices: int) -> "_DeviceThreads":
        with cls._pools_lock:
            pool = cls._pools.get(devices - 1)
            if pool is None:
                if len(cls._pools) >= 8:  # a bound: meshes of many sizes keep 8 pools at most
                    cls._pools.pop(next(iter(cls._pools))).executor.shutdown(wait=False)
                pool = cls._pools[devices - 1] = cls(devices - 1)
            return pool


def _run_devices(compiled, has_collectives: bool, blocks, mesh: Mesh, timeout: float | None,
                 function: str = ""):
    if distributed.is_initialized():
        return _run_this_process(compiled, blocks, mesh, timeout, function)
    if not has_collectives:
        # nothing to meet: each device's run is independent, so the calling thread runs them
        # (as each device in turn: its kernels are on its lane of a profile)
        alone = DeviceRun(1, mesh.size, _timeout(timeout))
        outs = []
        for d in range(mesh.size):
            with on_device(alone, d):
                outs.append(compiled(*blocks[d]))
        return outs
    timeout = _timeout(timeout)
    recording = RECORDER.active
    # SPMD: one replica, a partition per device; with a profile open, every meeting is logged
    run = DeviceRun(1, mesh.size, timeout, RECORDER.clock.now if recording else None)
    pool = _DeviceThreads.for_devices(mesh.size) if mesh.size > 1 else None
    # the devices run at once: each calls BLAS with its share of the cores, not all of them
    share = max(1, available_cores() // mesh.size)

    def work(device: int):
        with blas_threads(share), kernel_threads(share):
            return compiled(*blocks[device])
    try:
        if pool is None:
            return run_devices(run, work, wrap_own_errors=False)
        with pool.lock:
            return run_devices(run, work, pool.executor.submit, wrap_own_errors=False)
    finally:
        if recording:
            _record(run, function)


def _distributed_timeout(timeout: float | None) -> float | None:
    """The call's timeout, else the one given to tk.distributed.initialize (else None)."""
    return timeout if timeout is not None else distributed.initialize_timeout()


def _timeout(timeout: float | None) -> float:
    if timeout is not None:
        return timeout
    return float(env_int("TOOLKIT_COLLECTIVE_TIMEOUT", int(DEFAULT_TIMEOUT_S), 1, 86400))


def _run_this_process(compiled, blocks, mesh: Mesh, timeout: float | None, function: str):
    """Under ``tk.distributed.initialize()``: this process is device ``rank``; it runs its
    block, its collectives are MPI calls, and every rank gets every device's output blocks. A
    failure while running (a peer that never came, an error of this device's) ends the job
    with a message naming this rank: the other ranks would otherwise wait on it forever."""
    size = distributed.process_count()
    if mesh.size != size:
        raise ValueError(f"shard_map: the mesh has {mesh.size} devices but the MPI job has {size} "
                         "processes (one device per process)")
    rank = distributed.process_index()
    recording = RECORDER.active
    run = distributed.MpiRun(_timeout(_distributed_timeout(timeout)),
                             RECORDER.clock.now if recording else None)
    try:
        with on_device(run, rank):
            mine = compiled(*blocks[rank])
    except CollectiveError as e:
        distributed.abort(str(e))
    except Exception as e:  # noqa: BLE001 (the peers are waiting: end the job, saying why)
        distributed.abort(f"failed while running device {rank}: {type(e).__name__}: {e}")
    if recording:  # (waits are known once the ranks' profiles merge: merge_profiles)
        _record(run, function)
    return run.gather_blocks(mine)


def _record(run: DeviceRun, function: str) -> None:
    """A CollectiveEvent per device per collective, bandwidths by nccl-tests' formulas."""
    for m in run.meetings:
        wait = max(m.ready - m.arrived, 0.0)
        busy = max(m.done - max(m.ready, m.arrived), 1e-9)
        nbytes = algorithm_bytes(m)
        algbw = nbytes / busy
        RECORDER.record(CollectiveEvent(
            function, m.opcode, m.name, m.device, m.group, nbytes, m.arrived, wait, busy, algbw,
            algbw * bus_bandwidth_factor(m.opcode, len(m.group)), m.last, sequence=m.sequence))


def _assemble(blocks: Sequence[np.ndarray], spec: P, mesh: Mesh, what: str,
              varying: frozenset | None = None) -> np.ndarray:
    """The whole output from the devices' blocks. ``varying``: the axes the typing found the
    output varies along (None: unknown); where it varies along none the spec leaves out, the
    promise holds by construction and the blocks are not compared."""
    first = np.asarray(blocks[0])
    _check_spec(spec, first.ndim, mesh, what, None)
    named = {a for d in range(len(spec)) for a in spec.axes(d)}
    unnamed = [a for a in mesh.axis_names if a not in named]
    if varying is not None and not varying & set(unnamed) and not distributed.is_initialized():
        unnamed = []  # (on host devices the same computation gives the same bits)
    # the promise of an axis left out: every device along it holds the same block
    for device in range(mesh.size):
        at = mesh.coordinates(device)
        if any(at[a] for a in unnamed):
            base = dict(at, **{a: 0 for a in unnamed})
            reference = int(mesh.devices[tuple(base[a] for a in mesh.axis_names)])
            mine, theirs = np.asarray(blocks[device]), np.asarray(blocks[reference])
            if mine.shape != theirs.shape or not np.array_equal(mine, theirs, equal_nan=True):
                raise ValueError(
                    f"shard_map: {what}: out_specs {spec!r} leaves out mesh axis "
                    f"{[a for a in unnamed if at[a]][0]!r}, a promise that the devices along it "
                    f"compute the same value, but devices {reference} and {device} differ; name "
                    "the axis in the spec, or reduce over it (tk.lax.psum, pmean)")
    shape = list(first.shape)
    for d in range(len(spec)):
        shape[d] *= math.prod(mesh.shape[a] for a in spec.axes(d))
    out = np.empty(shape, first.dtype)
    for device in range(mesh.size):
        out[_block_index(spec, mesh, device, shape)] = blocks[device]
    return out
