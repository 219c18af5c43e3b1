"""XLA's collectives: who exchanges with whom, and what each device gets.

An SPMD program runs once per device; devices are numbered ``replica * partitions +
partition`` (XLA's global device ids). A collective's ``replica_groups`` list the devices that
combine their operands, in ids whose meaning the op's ``channel_id`` and
``use_global_device_ids`` choose (``xla/service/collective_ops_utils.h``):

- no channel id: cross-replica: groups of replica ids, within each partition;
- a channel id, no flag: cross-partition: groups of partition ids, within each replica;
- a channel id and ``use_global_device_ids=false``: cross-replica-and-partition: groups of
  replica ids, each with every partition;
- a channel id and ``use_global_device_ids=true``: flattened ids: groups of global device ids.

Empty groups mean one group of every id, in order. The results (``docs/operation_semantics.md``):
all-reduce folds the group's operands by ``to_apply`` in group order; all-gather concatenates
them along its dimension; reduce-scatter reduces, then device ``i`` of the group keeps block
``i``; all-to-all (array form, ``dimensions={d}``) sends block ``j`` of its operand to device
``j`` and concatenates what it receives in group order; collective-permute sends each source's
operand to its target, and a device no pair targets gets zeros.

Devices meet at a ``Rendezvous``: each thread of a ``DeviceRun`` deposits its operand for its
n-th collective and waits for its group, within a timeout, so that a device that never arrives,
or one that failed, is an error naming it rather than a hang."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .ops import OPS, GroupOp

DEFAULT_TIMEOUT_S = 60.0


class CollectiveError(RuntimeError):
    """A collective could not complete: a device did not arrive in time, failed, or ran a
    different program."""


def iota_groups(group_dims: tuple[int, int], reshape: tuple[int, ...],
                transpose: tuple[int, ...] | None = None) -> tuple[tuple[int, ...], ...]:
    """XLA's iota replica groups ``[G,S]<=[dims]T(perm)``: 0..N-1 shaped ``dims``, transposed by
    ``perm``, read as G groups of S."""
    total = int(np.prod(reshape)) if reshape else 0
    if total != group_dims[0] * group_dims[1]:
        raise ValueError(f"iota replica groups [{group_dims[0]},{group_dims[1]}] hold "
                         f"{group_dims[0] * group_dims[1]} ids but the iota has {total}")
    ids = np.arange(total).reshape(reshape)
    if transpose is not None:
        if sorted(transpose) != list(range(len(reshape))):
            raise ValueError(f"T{tuple(transpose)} is not a permutation of the iota's "
                             f"{len(reshape)} dimensions")
        ids = ids.transpose(transpose)
    return tuple(tuple(int(v) for v in row) for row in ids.reshape(group_dims))


def mesh_groups(names: tuple[str, ...], sizes: tuple[int, ...],
                axes: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """The device groups of a collective over mesh ``axes`` of a mesh whose devices are numbered
    row-major over ``names`` (of ``sizes``): one group per combination of the other axes, each
    ordered by the named axes' coordinates, the first named the major one (JAX's order)."""
    ids = np.arange(int(np.prod(sizes, dtype=np.int64))).reshape(sizes)
    moving = [names.index(a) for a in axes]
    fixed = [d for d in range(len(names)) if d not in moving]
    groups = ids.transpose(fixed + moving).reshape(-1, int(np.prod([sizes[d] for d in moving],
                                                                    dtype=np.int64)))
    return tuple(tuple(int(v) for v in row) for row in groups)


def group_mode(attrs) -> str:
    channel = attrs.get("channel_id") is not None
    flag = attrs.get("use_global_device_ids")
    if not channel:
        if flag is not None:
            raise ValueError("use_global_device_ids needs a channel_id (XLA: invalid combination "
                             "of has_channel_id and use_global_device_ids)")
        return "cross-replica"
    if flag is None:
        return "cross-partition"
    return "flattened-id" if flag else "cross-replica-and-partition"


def device_groups(opcode: str, attrs, replicas: int, partitions: int
                  ) -> list[tuple[int, ...]]:
    """The groups of global device ids that combine, each in the order results are combined."""
    if opcode == "collective-permute":
        raise ValueError("collective-permute has pairs, not groups")
    mode = group_mode(attrs)
    groups = tuple(attrs.get("replica_groups") or ())
    id_count = {"cross-replica": replicas, "cross-partition": partitions,
                "cross-replica-and-partition": replicas,
                "flattened-id": replicas * partitions}[mode]
    if not groups:
        if mode == "flattened-id":
            raise ValueError("replica groups must be specified in flattened-id mode "
                             "(use_global_device_ids=true)")
        groups = (tuple(range(id_count)),)
    seen = [i for g in groups for i in g]
    bad = [i for i in seen if not 0 <= i < id_count]
    if bad:
        raise ValueError(f"{opcode}: replica group id {bad[0]} is not one of the {id_count} "
                         f"ids of its mode ({mode})")
    if len(set(seen)) != len(seen):
        raise ValueError(f"{opcode}: an id appears in two replica groups: {groups}")
    out: list[tuple[int, ...]] = []
    for group in groups:
        if mode == "cross-replica":
            out.extend(tuple(r * partitions + p for r in group) for p in range(partitions))
        elif mode == "cross-partition":
            out.extend(tuple(r * partitions + p for p in group) for r in range(replicas))
        elif mode == "cross-replica-and-partition":
            out.append(tuple(r * partitions + p for r in group for p in range(partitions)))
        else:
            out.append(tuple(group))
    return out


def permute_pairs(attrs, replicas: int, partitions: int, device: int
                  ) -> tuple[int | None, list[int]]:
    """For ``device``: the device it receives from (None: it gets zeros) and the peers it must
    meet: its own replica's devices (with a channel id: partitions exchange) or its partition's."""
    replica, partition = divmod(device, partitions)
    if attrs.get("channel_id") is not None:
        peers = [replica * partitions + p for p in range(partitions)]
        own = partition
    else:
        peers = [r * partitions + partition for r in range(replicas)]
        own = replica
    source = None
    for s, t in attrs["source_target_pairs"]:
        if not (0 <= s < len(peers) and 0 <= t < len(peers)):
            raise ValueError(f"collective-permute pair {{{s},{t}}} names an id outside "
                             f"0..{len(peers) - 1}")
        if t == own:
            source = peers[s]
    return source, peers


def combine(opcode: str, attrs, values: list[np.ndarray], position: int,
            reduce: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """What the device at ``position`` of its group gets, given the group's operands in order."""
    if opcode == "all-reduce":
        return _fold(values, reduce)
    dims = attrs.get("dimensions") or (0,)
    dim = dims[0]
    n = len(values)
    if opcode == "all-gather":
        return np.concatenate(values, axis=dim)
    if opcode == "reduce-scatter":
        return np.split(_fold(values, reduce), n, axis=dim)[position]
    if opcode == "all-to-all":
        if isinstance(values[0], tuple):  # tuple form: operand j goes to the group's device j
            return tuple(v[position] for v in values)
        return np.concatenate([np.split(v, n, axis=dim)[position] for v in values], axis=dim)
    raise ValueError(f"{opcode} is not a grouped collective")


def _fold(values, reduce):
    out = values[0]
    for v in values[1:]:
        out = reduce(out, v)
    return np.asarray(out).astype(values[0].dtype, copy=False)


@dataclass
class _Slot:
    opcode: str
    name: str
    values: dict
    made: bool = False  # the group's shared work is done (the devices may take their results)
    shared: object = None  # an all-reduce's or all-gather's one result
    computed: int = 0  # devices that made their own result
    results: dict | None = None  # a small meeting's results, every device's, made by the last
    error: BaseException | None = None  # what making a result raised
    readers: int = 0
    ready: float = 0.0  # when the last device of the group arrived
    last: int = -1  # which device that was
    outs: dict | None = None  # an all-reduce's devices' result buffers (a chunked meeting)
    chunked: bool = False  # each device reduces its chunk into every device's buffer


@dataclass(frozen=True, slots=True)
class Meeting:
    """One device's part in one collective, for the profile: when it arrived, when the last
    device of its group arrived (``ready``: the wait in between is the straggler's cost) and
    when its result was made."""

    device: int
    sequence: int
    opcode: str
    name: str
    group: tuple[int, ...]
    operand_bytes: int
    result_bytes: int
    arrived: float
    ready: float
    done: float
    last: int  # the device whose arrival completed the group


class DeviceRun:
    """The devices of one SPMD execution (threads of one process) and where they meet."""

    def __init__(self, replicas: int, partitions: int = 1,
                 timeout: float = DEFAULT_TIMEOUT_S, clock: Callable[[], float] | None = None):
        """``clock``: when given, every device's part in every collective is logged
        (``meetings``) with times from it."""
        if replicas < 1 or partitions < 1:
            raise ValueError(f"an SPMD run needs at least one replica and one partition, not "
                             f"{replicas} and {partitions}")
        self.replicas, self.partitions, self.timeout = replicas, partitions, timeout
        self.devices = replicas * partitions
        self._cv = threading.Condition()
        self._slots: dict[tuple, _Slot] = {}
        self.failed: dict[int, BaseException] = {}
        self.clock = clock
        self.meetings: list[Meeting] = []

    def fail(self, device: int, error: BaseException) -> None:
        """``device`` stopped with ``error``: every device waiting for it stops too."""
        with self._cv:
            self.failed.setdefault(device, error)
            self._cv.notify_all()

    def meet(self, device: int, sequence: int, inst, group: tuple[int, ...], value,
             result: Callable[[dict, int], object], out: np.ndarray | None = None,
             fold: Callable[[list], np.ndarray] | None = None, gather_dim: int | None = None,
             exchange_dim: int | None = None):
        """Deposit ``value`` for ``device``'s ``sequence``-th collective; once every device of
        ``group`` has, each takes its result (``result(values, device)``), into ``out`` (the
        compiled program's buffer for it) when given, else a new array of its own.

        Operands are not copied in: no device goes on while a peer may still read its operand.
        Work the group shares is made once by the last device to arrive (the one result of an
        all-reduce or all-gather, which every device then copies at once). Other results each
        device makes for itself, at once, detached from the peers' operands (a reduce-scatter
        folds its own block only); then the devices wait for one another before writing their
        buffers (a buffer may be the device's own operand, which a peer was reading).

        A large all-reduce (``fold``: the reduction of the group's operands, in group order)
        is a reduce-scatter and an all-gather in shared memory, as MPI's and NCCL's in-node
        all-reduces are: each device folds its own chunk of the operands and writes it into
        every device's result buffer, so the devices share the work and the sum is written
        straight where it goes (no one result that each device copies). Each element is
        folded in the same order, so the results are the same bits. A large all-gather
        (``gather_dim``: its dimension) likewise: each device writes its operand into its block
        of every device's buffer; and a large all-to-all (``exchange_dim``): each device writes
        its operand's block k into device k's buffer, at its own place."""
        key = (sequence, group)
        shares = fold is not None or gather_dim is not None or exchange_dim is not None
        if shares and isinstance(value, np.ndarray) and out is None \
                and value.nbytes * len(group) > SMALL_MEETING_BYTES:
            dims = list(value.shape)
            if gather_dim is not None:
                dims[gather_dim] *= len(group)
            out = np.empty(dims, value.dtype)
        deadline = time.monotonic() + self.timeout
        clock = self.clock
        arrived = clock() if clock is not None else 0.0
        same = inst.opcode in GroupOp.SAME_RESULT_IN_GROUP
        with self._cv:
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot(inst.opcode, inst.name, {})
            elif slot.opcode != inst.opcode:
                raise CollectiveError(
                    f"device {device} ran {inst.opcode} %{inst.name} as its collective number "
                    f"{sequence}, where device {min(slot.values)} ran {slot.opcode} %{slot.name}: "
                    "the devices run different programs")
            slot.values[device] = value
            if shares:
                if slot.outs is None:
                    slot.outs = {}
                slot.outs[device] = out
            last = len(slot.values) == len(group)
            if last:
                slot.ready = clock() if clock is not None else 0.0
                slot.last = device
                slot.chunked = shares and _chunkable(slot.values, slot.outs, group, gather_dim,
                                                     exchange_dim is not None)
        if shares and not last:  # (the last to arrive decides how: wait for it)
            with self._cv:
                self._wait_for(slot, lambda: slot.made, device, group, inst, deadline)
        if slot.chunked:
            def work():
                if gather_dim is not None:
                    _gather_block(slot.values, slot.outs, group, device, gather_dim)
                elif exchange_dim is not None:
                    _exchange_blocks(slot.values, slot.outs, group, device, exchange_dim)
                else:
                    _reduce_chunk(slot.values, slot.outs, group, device, fold)
            return self._share(slot, key, device, group, inst, work, deadline, arrived)
        mine = None
        if last:  # (outside the lock: the others wait on the condition, not for the lock)
            try:
                if same:  # (this makes the shared work)
                    mine = _detached(result(slot.values, device), slot.values)
                    if same:
                        slot.shared = mine
                elif _nbytes(value) * len(group) <= SMALL_MEETING_BYTES:
                    # small: making every result here costs less than waking the devices twice
                    slot.results = {d: _detached(result(slot.values, d), slot.values)
                                    for d in group}
            except BaseException as e:  # noqa: BLE001 - every device of the group raises it
                slot.error = e
            with self._cv:
                slot.made = True
                self._cv.notify_all()
        with self._cv:
            self._wait_for(slot, lambda: slot.made, device, group, inst, deadline)
            ready, last_device = slot.ready, slot.last
        if slot.error is not None:
            self._leave(slot, key, group)
            raise slot.error
        if same or slot.results is not None:  # made already, fresh: each device takes its own
            made = slot.shared if same else slot.results[device]
            self._leave(slot, key, group)
            if out is None:
                out = _copied(made) if same else made
            else:
                np.copyto(out, made, casting="no")
        else:
            try:
                if mine is None:
                    mine = result(slot.values, device)
                mine = _detached(mine, slot.values)  # from the peers' operands
            except BaseException as e:  # noqa: BLE001 - the peers must not wait for it
                with self._cv:
                    slot.error = slot.error or e
                    slot.computed += 1
                    self._cv.notify_all()
                self._leave(slot, key, group)
                raise
            with self._cv:
                slot.computed += 1
                self._cv.notify_all()
                self._wait_for(slot, lambda: slot.computed == len(group), device, group, inst,
                               deadline)
            self._leave(slot, key, group)
            if slot.error is not None:
                raise slot.error
            if out is not None:
                np.copyto(out, mine, casting="no")
            else:
                out = mine
        if clock is not None:
            with self._cv:
                self.meetings.append(Meeting(
                    device, sequence, inst.opcode, inst.name, group, _nbytes(value),
                    _nbytes(out), arrived, ready, clock(), last_device))
        return out

    def _share(self, slot, key, device: int, group, inst, work: Callable[[], None],
               deadline: float, arrived: float) -> np.ndarray:
        """A shared meeting (``meet``): once every device of the group has arrived, this device
        does its part of the work (``work``: writes into the devices' buffers); a device
        leaves when every part is done."""
        with self._cv:
            if not slot.made:  # (the last to arrive: the others wait for this)
                slot.made = True
                self._cv.notify_all()
            ready, last_device = slot.ready, slot.last
        try:
            work()
        except BaseException as e:  # noqa: BLE001 - every device of the group raises it
            with self._cv:
                slot.error = slot.error or e
        with self._cv:
            slot.computed += 1
            self._cv.notify_all()
            self._wait_for(slot, lambda: slot.computed == len(group), device, group, inst,
                           deadline)
        out = slot.outs[device]
        self._leave(slot, key, group)
        if slot.error is not None:
            raise slot.error
        if self.clock is not None:
            with self._cv:
                self.meetings.append(Meeting(
                    device, key[0], inst.opcode, inst.name, group,
                    slot.values[device].nbytes, out.nbytes, arrived, ready, self.clock(),
                    last_device))
        return out

    def _wait_for(self, slot, done: Callable[[], bool], device: int, group, inst,
                  deadline: float) -> None:
        """Wait (holding the condition) until ``done()`` or the slot failed; a device that
        failed or never arrives is an error naming it."""
        while not done() and slot.error is None:
            failed = [d for d in group if d in self.failed and d not in slot.values]
            if failed:
                d = failed[0]
                raise CollectiveError(
                    f"{inst.opcode} %{inst.name}: device {d} failed before it arrived "
                    f"({type(self.failed[d]).__name__}: {self.failed[d]})")
            left = deadline - time.monotonic()
            if left <= 0:
                missing = [d for d in group if d not in slot.values]
                raise CollectiveError(
                    f"{inst.opcode} %{inst.name}: device(s) {missing} did not arrive within "
                    f"{self.timeout:g} s (device {device} waited; TOOLKIT_COLLECTIVE_TIMEOUT "
                    "sets the limit)")
            self._cv.wait(min(left, 0.5))

    def _leave(self, slot, key, group) -> None:
        with self._cv:
            slot.readers += 1
            if slot.readers == len(group) and self._slots.get(key) is slot:
                del self._slots[key]


SMALL_MEETING_BYTES = 64 << 10  # a group's operands up to this: one device makes all results


CHUNK_BLOCK_BYTES = 128 << 10  # a chunked all-reduce folds this much of each operand at once


def _chunk(n: int, parts: int, k: int) -> tuple[int, int]:
    """Elements [lo, hi) of ``n`` that part ``k`` of ``parts`` takes (the first get one more)."""
    size, extra = divmod(n, parts)
    lo = k * size + min(k, extra)
    return lo, lo + size + (k < extra)


def _reduce_chunk(values: dict, outs: dict, group, device: int, fold) -> None:
    """This device's part of a shared all-reduce: its chunk of the flat operands folded, in
    cache-sized blocks (the fold's temporaries are then reused heap memory, not fresh pages
    of a chunk-sized array faulted in for every step of the fold), into every buffer."""
    first = values[group[0]]
    lo, hi = _chunk(first.size, len(group), group.index(device))
    operands = [values[g].reshape(-1) for g in group]
    flat_outs = [outs[g].reshape(-1) for g in group]
    step = max(1, CHUNK_BLOCK_BYTES // first.itemsize)
    for start in range(lo, hi, step):
        end = min(hi, start + step)
        part = fold([v[start:end] for v in operands])
        for o in flat_outs:
            np.copyto(o[start:end], part, casting="no")


def _gather_block(values: dict, outs: dict, group, device: int, dim: int) -> None:
    """This device's part of a shared all-gather: its operand into its block of every
    buffer."""
    value = values[device]
    size = value.shape[dim]
    k = group.index(device)
    block = (slice(None),) * dim + (slice(k * size, (k + 1) * size),)
    for g in group:
        np.copyto(outs[g][block], value, casting="no")


def _exchange_blocks(values: dict, outs: dict, group, device: int, dim: int) -> None:
    """This device's part of a shared all-to-all: block k of its operand (along ``dim``) into
    the k-th device's buffer, at this device's place in the group."""
    value = values[device]
    n = len(group)
    size = value.shape[dim] // n
    own = group.index(device)
    for k, g in enumerate(group):
        src = (slice(None),) * dim + (slice(k * size, (k + 1) * size),)
        dst = (slice(None),) * dim + (slice(own * size, (own + 1) * size),)
        np.copyto(outs[g][dst], value[src], casting="no")


def _chunkable(values: dict, outs: dict, group, gather_dim: int | None = None,
               exchange: bool = False) -> bool:
    """May the devices of an all-reduce (an all-gather: ``gather_dim``; an all-to-all:
    ``exchange``) each write their part into every device's buffer? Every operand and buffer a
    C-contiguous array of the shape and dtype the collective gives (chunks of the flat arrays
    are views), and no buffer sharing memory with an operand or buffer other than its own
    device's operand, itself (an all-reduce's device then reads and writes its own chunk only;
    an all-gather's or all-to-all's buffer shares nothing)."""
    first = values[group[0]]
    dims = list(getattr(first, "shape", ()))
    if gather_dim is not None and dims:
        dims[gather_dim] *= len(group)
    for g in group:
        v, o = values[g], outs.get(g)
        if not isinstance(v, np.ndarray) or not isinstance(o, np.ndarray) \
                or v.shape != first.shape or v.dtype != first.dtype \
                or o.shape != tuple(dims) or o.dtype != first.dtype \
                or not v.flags.c_contiguous or not o.flags.c_contiguous \
                or not o.flags.writeable:
            return False
    for g in group:
        o = outs[g]
        for h in group:
            if h != g and np.may_share_memory(o, outs[h]):
                return False
            v = values[h]
            if np.may_share_memory(o, v) and not (gather_dim is None and not exchange and h == g
                                                  and o.ctypes.data == v.ctypes.data):
                return False
    return True


def _detached(value, values: dict):
    """``value``, copied where it shares memory with an operand of the meeting."""
    return _copied(value) if _overlaps(value, values.values()) else value


def _overlaps(value, others) -> bool:
    if isinstance(value, tuple):
        return any(_overlaps(v, others) for v in value)
    for other in others:
        if isinstance(other, tuple):
            if _overlaps(value, other):
                return True
        elif np.may_share_memory(value, other):
            return True
    return False


def _copied(value):
    if isinstance(value, tuple):
        return tuple(_copied(v) for v in value)
    return np.array(value, copy=True)


def _nbytes(value) -> int:
    if isinstance(value, tuple):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


def bus_bandwidth_factor(opcode: str, n: int) -> float:
    """nccl-tests' busbw / algbw: all-reduce 2(n-1)/n; all-gather, reduce-scatter and
    all-to-all (n-1)/n; a permute (send/recv) 1 (doc/PERFORMANCE.md)."""
    if opcode == "all-reduce":
        return 2 * (n - 1) / n
    if opcode in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    return 1.0


def algorithm_bytes(meeting: Meeting) -> int:
    """nccl-tests' S: the all-reduce's (and a permute's) buffer; all-gather's whole result
    (recvcount x n); reduce-scatter's and all-to-all's whole operand (count x n)."""
    if meeting.opcode == "all-gather":
        return meeting.result_bytes
    return meeting.operand_bytes


def run_devices(run: DeviceRun, work: Callable[[int], object],
                submit: Callable | None = None, wrap_own_errors: bool = True) -> list:
    """``work(device)`` for every device of ``run``, each on its own thread as that device
    (``on_device``); returns the results in device order. ``submit(fn, device)`` (a pool's)
    runs devices 1.. while the calling thread is device 0; without it, a thread is started per
    device. A device that raises releases the others (``run.fail``); the first device that
    failed of itself is the cause raised: as ``CollectiveError("device d failed: ...")``, or,
    with ``wrap_own_errors=False``, its own exception as it is."""
    outs: list = [None] * run.devices
    errors: dict[int, BaseException] = {}

    def device_main(device: int) -> None:
        try:
            with on_device(run, device):
                outs[device] = work(device)
        except BaseException as e:  # noqa: BLE001 (every failure must release the others)
            errors[device] = e
            run.fail(device, e)

    if submit is not None:
        futures = [submit(device_main, d) for d in range(1, run.devices)]
        device_main(0)
        for future in futures:
            future.result()
    else:
        threads = [threading.Thread(target=device_main, args=(d,), daemon=True,
                                    name=f"toolkit-device-{d}") for d in range(run.devices)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        causes = {d: e for d, e in errors.items() if not isinstance(e, CollectiveError)}
        device, error = min((causes or errors).items())
        if not causes:
            raise CollectiveError(f"device {device}: {error}") from None
        if not wrap_own_errors:
            raise error  # the user's own error (a shape, a dtype ...), as one device saw it
        raise CollectiveError(f"device {device} failed: {type(error).__name__}: {error}"
                              ) from error
    return outs


class _Context(threading.local):
    run: DeviceRun | None = None
    device: int = 0
    sequence: int = 0


_CONTEXT = _Context()


class on_device:
    """Within it, this thread is ``device`` of ``run``: collectives meet the run's other
    devices. Outside any, a program runs as the only device (one replica, one partition)."""

    def __init__(self, run: DeviceRun, device: int):
        self.run, self.device = run, device

    def __enter__(self):
        self.saved = (_CONTEXT.run, _CONTEXT.device, _CONTEXT.sequence)
        _CONTEXT.run, _CONTEXT.device, _CONTEXT.sequence = self.run, self.device, 0
        return self

    def __exit__(self, *exc):
        _CONTEXT.run, _CONTEXT.device, _CONTEXT.sequence = self.saved
        return False


_SINGLE = DeviceRun(1, 1)


def device_lane(lane: str) -> str:
    """A kernel's timeline lane: on a device of a multi-device run, that device's own
    (``device 2``), so that the devices' kernels are not drawn over one another."""
    run = _CONTEXT.run
    if run is None or run.devices <= 1:
        return lane
    return f"device {_CONTEXT.device}"


def evaluate(inst, operand, reduce: Callable | None = None, out: np.ndarray | None = None):
    """The value of the collective ``inst`` on this thread's device (the interpreter's rule);
    with ``out``, written into that buffer (a compiled program's), which is returned."""
    run = _CONTEXT.run or _SINGLE
    device = _CONTEXT.device if _CONTEXT.run is not None else 0
    replica, partition = divmod(device, run.partitions)
    if inst.opcode == "replica-id" or inst.opcode == "partition-id":
        value = np.array(replica if inst.opcode == "replica-id" else partition, np.uint32)
        if out is None:
            return value
        out[...] = value
        return out
    sequence = _CONTEXT.sequence
    _CONTEXT.sequence += 1
    try:
        if inst.opcode == "collective-permute":
            source, peers = permute_pairs(inst.attrs, run.replicas, run.partitions, device)
            group = tuple(peers)

            def result(values, d):
                src = source if d == device else permute_pairs(
                    inst.attrs, run.replicas, run.partitions, d)[0]
                if src is None:
                    return np.zeros_like(values[d])
                return values[src]
        else:
            groups = device_groups(inst.opcode, inst.attrs, run.replicas, run.partitions)
            group = next((g for g in groups if device in g), None)
            if group is None:
                raise CollectiveError(f"{inst.opcode} %{inst.name}: device {device} is in none "
                                      f"of its replica groups {groups}")

            def result(values, d):
                operands = [values[g] for g in group]
                if inst.opcode == "reduce-scatter":  # each device folds its own block only
                    dim = (inst.attrs.get("dimensions") or (0,))[0]
                    k = group.index(d)
                    return _fold([np.split(v, len(group), axis=dim)[k] for v in operands],
                                 reduce)
                return combine(inst.opcode, inst.attrs, operands, group.index(d), reduce)
    except ValueError as e:
        raise CollectiveError(str(e)) from None
    if inst.opcode == "all-reduce" and reduce is not None and run.devices > 1:
        return run.meet(device, sequence, inst, group, operand, result, out,
                        lambda parts: _fold(parts, reduce))
    if inst.opcode == "all-to-all" and run.devices > 1 and "dimensions" in inst.attrs \
            and not isinstance(operand, tuple):  # (the array form: one split and concat dim)
        return run.meet(device, sequence, inst, group, operand, result, out,
                        exchange_dim=inst.attrs["dimensions"][0])
    if inst.opcode == "all-gather" and run.devices > 1:
        return run.meet(device, sequence, inst, group, operand, result, out,
                        gather_dim=(inst.attrs.get("dimensions") or (0,))[0])
    return run.meet(device, sequence, inst, group, operand, result, out)


COLLECTIVE_OPCODES = frozenset(name for name, op in OPS.items() if op.category == "collective")
