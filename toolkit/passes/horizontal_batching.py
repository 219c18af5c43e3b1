"""Horizontal batching: alike computations over the windows of one array become one computation
over those windows stacked.

Attention written one head at a time (``for h in range(12): q[:, s] @ k[:, s].T ...``) or a
list of columns (``np.stack([f(x[:, j]) for j in range(n)], axis=1)``) unrolls at trace time
into one copy of the work per head or column: a dot per head, a softmax per head, each its own
kernel. When the copies are the same instructions over windows of one array that lie at a
constant step (a tiling), this pass computes them once over a batch dimension, as ``vmap``
would have: the windows stacked are a view of the array (a slice, a reshape that splits the
sliced dimension into (lanes, step), a transpose that puts the lanes first), the dots become
one batched dot (one strided-batched GEMM on the GPU), the softmaxes one row-wise kernel, and a
``concatenate`` of the results in lane order is a transpose and reshape of the batched result.

- Seeds: ``slice``s of one operand, alike except for their start in one dimension, whose starts
  form an arithmetic progression with a step no shorter than the window (windows that do not
  overlap: a stencil's overlapping windows are fusion's business).
- Growth: an instruction of a batchable opcode (elementwise, broadcast, transpose, reshape,
  copy, slice, a one-input reduce, a dot) whose operands are lanes of batched values, at fixed
  lane offsets of each other, or one value shared by every lane, is a lane of a new batched
  value when two or more such instructions are alike (opcode, shape, attributes, operands up to
  their lane) and their lanes are a progression. A dot with one operand shared (``x @ W`` per
  lane) batches where it has no batch dimensions.
- The lanes of a batched value never read each other, so batching makes no cycle: seeds read
  one array, and a lane reads lanes of batched values, each at its own lane, or a value every
  lane reads; a path from one lane to another would be a path between two lanes of an operand
  (by induction, none) or through the shared value back into the lane that reads it (a cycle).
- Worth: a batched value is kept where it is a dot or a reduce (``GroupOp.BATCHED_ALONE``), or
  where its lanes end in a ``concatenate`` in lane order; elementwise tails whose lanes are
  read one at a time go back to what they were (a batched producer read through one slice per
  lane would be stored, where each lane alone fuses into its reader). Seeds nothing batched
  reads are dropped.

An elementwise operation and a dot of each batch element compute each lane's bits; a reduce
of each row computes each lane's value, summed in the row kernel's order (a float sum may
differ from the lane's alone in its last bits, as both differ from NumPy's pairwise sums).
Each batched value leaves a FusionDecision (``BATCHED_ALIKE``) naming its lanes and what it
replaced. Linear in the program's size: each
slice is bucketed once per dimension, and each instruction once per batched value it reads."""
from __future__ import annotations

import heapq
from collections import Counter, defaultdict, deque

from ..ir.builder import ComputationBuilder, NameUniquer
from ..ir.nodes import Computation, Instruction, Module
from ..ir.ops import GroupOp, is_elementwise
from ..ir.shapes import Shape
from ..ir.structural import frozen_attribute
from ..profiler.events import FusionDecision
from .rewriter import replace_entry, with_operands

REASONS = {"BATCHED_ALIKE": "alike computations over windows of one array run as one batched "
                            "computation"}
MIN_LANES = 2


class _Batch:
    """A batched value: ``lanes[i]`` is the instruction it computes at batch index ``i``."""
    __slots__ = ("lanes", "seed", "sources", "kept")

    def __init__(self, lanes: list[Instruction], seed=None, sources=None):
        self.lanes = lanes
        self.seed = seed  # a seed's (operand, dim, first start, step, width)
        # per operand position: (batch, first lane, lane step), or None where every lane reads
        # the same value (the first lane's operand there)
        self.sources: list = sources or []
        self.kept = True


def _frozen(attrs, keys: dict) -> tuple:
    return tuple(sorted((k, frozen_attribute(v, keys)) for k, v in attrs.items()))


# ------------------------------------------------------------------------------------- seeds
def _seed_batches(entry: Computation, taken: dict) -> list[_Batch]:
    buckets: dict[tuple, list[tuple[int, Instruction]]] = defaultdict(list)
    for inst in entry.instructions:
        if inst.opcode != "slice":
            continue
        spec = tuple(tuple(s) for s in inst.attrs["slice"])
        for d, (start, limit, stride) in enumerate(spec):
            if stride != 1 or limit - start >= inst.operands[0].shape.dims[d]:
                continue
            key = (inst.operands[0], d, limit - start, spec[:d], spec[d + 1:])
            buckets[key].append((start, inst))
    seeds = []
    for (source, d, width, _, _), found in buckets.items():
        if len(found) < MIN_LANES:
            continue
        found.sort(key=lambda p: p[0])
        size = source.shape.dims[d]
        run: list[tuple[int, Instruction]] = []

        def close():
            lanes = [inst for _, inst in run]
            if len(lanes) >= MIN_LANES:
                step = run[1][0] - run[0][0]
                if run[0][0] + len(run) * step <= size or width == 1:
                    batch = _Batch(lanes, seed=(source, d, run[0][0], step, width))
                    seeds.append(batch)
                    for lane, inst in enumerate(lanes):
                        taken[inst] = (batch, lane)

        for start, inst in found:
            if inst in taken:
                continue
            if run and (start - run[-1][0] < width
                        or (len(run) > 1 and start - run[-1][0] != run[1][0] - run[0][0])):
                close()
                run = []
            run.append((start, inst))
        close()
    return seeds


# ------------------------------------------------------------------------------------ growth
def _batchable(inst: Instruction) -> bool:
    op = inst.opcode
    if op not in GroupOp.LANE_BATCHABLE:
        return False
    if is_elementwise(op):
        return all(o.shape.dims == inst.shape.dims for o in inst.operands)
    return op != "reduce" or len(inst.operands) == 2  # (one input and its init value)


def _user_key(inst: Instruction, taken: dict, keys: dict):
    """(key, lane, operand lanes) of ``inst`` as a lane of some batched value, or None: alike
    instructions share a key, and ``lane`` orders them."""
    parts = []
    first = None
    grouped = []
    for o in inst.operands:
        found = taken.get(o)
        if found is None:
            parts.append(("shared", o))
            grouped.append(None)
            continue
        batch, lane = found
        if first is None:
            first = lane
        parts.append(("batch", id(batch), lane - first))
        grouped.append(found)
    if first is None:
        return None
    if inst.opcode == "reduce" and grouped[1] is not None:
        return None  # (the init value is one scalar for every row)
    if inst.opcode == "dot" and None in grouped and (
            inst.attrs.get("lhs_batch_dims") or inst.attrs.get("rhs_batch_dims")):
        return None
    if inst.opcode == "dot" and inst.operands[0] is inst.operands[1]:
        return None  # (x @ x.T: NumPy's matmul makes it a syrk, whose bits a batched GEMM lacks)
    key = (inst.opcode, inst.shape.dtype, inst.shape.dims, _frozen(inst.attrs, keys),
           tuple(parts))
    return key, first, grouped


def _grow(seeds: list[_Batch], taken: dict, users: dict) -> list[_Batch]:
    batches = list(seeds)
    keys: dict = {}
    work = deque(seeds)
    while work:
        batch = work.popleft()
        buckets: dict[tuple, dict[int, tuple]] = defaultdict(dict)
        seen = set()
        for member in batch.lanes:
            for user in users.get(member, ()):
                if user in taken or user in seen or not _batchable(user):
                    continue
                seen.add(user)
                found = _user_key(user, taken, keys)
                if found is None:
                    continue
                key, lane, grouped = found
                if lane in buckets[key]:
                    continue  # (two alike users of one lane: each may batch, not both)
                buckets[key][lane] = (user, grouped)
        for by_lane in buckets.values():
            lanes = sorted(by_lane)
            start = 0
            while start < len(lanes) - 1:
                step = lanes[start + 1] - lanes[start]
                end = start + 1
                while end + 1 < len(lanes) and lanes[end + 1] - lanes[end] == step:
                    end += 1
                chosen = [by_lane[lane] for lane in lanes[start:end + 1]]
                start = end + 1
                members = [u for u, _ in chosen]
                if len(members) < MIN_LANES:
                    continue
                grouped = chosen[0][1]  # (the first lane's operands: the others follow at step)
                sources = [None if g is None else (g[0], g[1], step) for g in grouped]
                new = _Batch(members, sources=sources)
                batches.append(new)
                work.append(new)
                for lane, m in enumerate(members):
                    taken[m] = (new, lane)
    return batches


# ------------------------------------------------------------------------------------- worth
def _stack_runs(concat: Instruction, taken: dict) -> list[tuple[int, int, _Batch, int]]:
    """Runs (first operand, operand count, batch, first lane) of ``concat``'s operands that are
    consecutive lanes of one kept batched value."""
    runs = []
    ops = concat.operands
    i = 0
    while i < len(ops):
        found = taken.get(ops[i])
        if found is None or not found[0].kept:
            i += 1
            continue
        batch, lane = found
        j = i + 1
        while j < len(ops) and taken.get(ops[j]) == (batch, lane + j - i):
            j += 1
        if j - i >= MIN_LANES:
            runs.append((i, j - i, batch, lane))
        i = j
    return runs


def _prune(batches: list[_Batch], taken: dict, users: dict) -> None:
    readers: dict[int, int] = Counter()  # batch -> kept batches reading it
    for b in batches:
        for s in b.sources:
            if s is not None:
                readers[id(s[0])] += 1
    # (each concatenation once: a stack of n lanes is a user of every one of them)
    concatenations = {u: None for b in batches for m in b.lanes for u in users.get(m, ())
                      if u.opcode == "concatenate"}
    stacked = {id(batch) for c in concatenations for _, _, batch, _ in _stack_runs(c, taken)}
    changed = True
    while changed:
        changed = False
        for b in reversed(batches):
            if not b.kept or readers[id(b)] or id(b) in stacked:
                continue
            if b.seed is None and b.lanes[0].opcode in GroupOp.BATCHED_ALONE:
                continue
            b.kept = False
            changed = True
            for s in b.sources:
                if s is not None:
                    readers[id(s[0])] -= 1
    for b in batches:
        if not b.kept:
            for m in b.lanes:
                del taken[m]


# ---------------------------------------------------------------------------------- emitting
class _Emitter:
    def __init__(self, builder: ComputationBuilder, mapping: dict, taken: dict):
        self.b = builder
        self.taken = taken
        self.mapping = mapping  # old instruction -> new, for instructions not batched
        self.value: dict[int, Instruction] = {}  # batch -> its batched instruction
        self.unstacked: dict[Instruction, Instruction] = {}

    def add(self, opcode, operands, attrs, dims, dtype, metadata):
        return self.b.add(opcode, operands, attrs, Shape(dtype, tuple(dims)), metadata)

    def lanes_of(self, source, count: int, metadata) -> Instruction:
        batch, first, step = source
        value = self.value[id(batch)]
        if first == 0 and step == 1 and count == len(batch.lanes):
            return value
        dims = value.shape.dims
        spec = ((first, first + (count - 1) * step + 1, step),) + tuple((0, n, 1) for n in dims[1:])
        return self.add("slice", (value,), {"slice": spec}, (count,) + tuple(dims[1:]),
                        value.shape.dtype, metadata)

    def shared(self, inst: Instruction, count: int, metadata) -> Instruction:
        x = self.operand(inst)
        return self.add("broadcast", (x,), {"dimensions": tuple(range(1, x.shape.rank + 1))},
                        (count,) + tuple(x.shape.dims), x.shape.dtype, metadata)

    def operand(self, inst: Instruction) -> Instruction:
        new = self.mapping.get(inst)
        if new is not None:
            return new
        return self.unstack(inst)

    def unstack(self, inst: Instruction) -> Instruction:
        done = self.unstacked.get(inst)
        if done is not None:
            return done
        batch, lane = self.taken[inst]
        value = self.value[id(batch)]
        dims = value.shape.dims
        md = inst.metadata
        spec = ((lane, lane + 1, 1),) + tuple((0, n, 1) for n in dims[1:])
        piece = self.add("slice", (value,), {"slice": spec}, (1,) + tuple(dims[1:]),
                         value.shape.dtype, md)
        done = self.add("reshape", (piece,), {}, inst.shape.dims, inst.shape.dtype, md)
        self.unstacked[inst] = done
        return done

    def seed(self, batch: _Batch) -> Instruction:
        source, d, first, step, width = batch.seed
        lanes = len(batch.lanes)
        md = batch.lanes[0].metadata
        x = self.operand(source)
        spec = [tuple(s) for s in batch.lanes[0].attrs["slice"]]
        dtype = x.shape.dtype
        if first + lanes * step <= x.shape.dims[d]:
            spec[d] = (first, first + lanes * step, 1)
            split = (lanes, step)
        else:  # (single elements at a step whose last window ends the array: a strided slice)
            spec[d] = (first, first + (lanes - 1) * step + 1, step)
            split = (lanes, 1)
        dims = [-(-(hi - lo) // st) for lo, hi, st in spec]
        if any(s != (0, n, 1) for s, n in zip(spec, x.shape.dims)):
            x = self.add("slice", (x,), {"slice": tuple(spec)}, dims, dtype, md)
        dims = dims[:d] + list(split) + dims[d + 1:]
        x = self.add("reshape", (x,), {}, dims, dtype, md)
        if split[1] != width:
            spec = [(0, n, 1) for n in dims]
            spec[d + 1] = (0, width, 1)
            dims[d + 1] = width
            x = self.add("slice", (x,), {"slice": tuple(spec)}, dims, dtype, md)
        if d:
            perm = (d,) + tuple(range(d)) + tuple(range(d + 1, len(dims)))
            x = self.add("transpose", (x,), {"dimensions": perm}, [dims[p] for p in perm], dtype,
                         md)
        return x

    def batched(self, batch: _Batch) -> Instruction:
        if batch.seed is not None:
            return self.seed(batch)
        first = batch.lanes[0]
        lanes = len(batch.lanes)
        md = first.metadata
        ops = [self.lanes_of(source, lanes, md) if source is not None else operand
               for source, operand in zip(batch.sources, first.operands)]
        op = first.opcode
        attrs = dict(first.attrs)
        dims = (lanes,) + tuple(first.shape.dims)
        dtype = first.shape.dtype
        shift = tuple(d + 1 for d in attrs.get("dimensions", ()))
        if op == "dot":
            return self.dot(batch, ops, attrs, lanes, md)
        if op == "reduce":
            return self.add(op, (ops[0], self.operand(ops[1])), {**attrs, "dimensions": shift},
                            dims, dtype, md)
        ops = [o if s is not None else self.shared(o, lanes, md)
               for o, s in zip(ops, batch.sources)]
        if op == "broadcast" or op == "transpose":  # (the lanes first, the rest one further on)
            attrs["dimensions"] = (0,) + shift
        elif op == "slice":
            attrs["slice"] = ((0, lanes, 1),) + tuple(tuple(s) for s in attrs["slice"])
        return self.add(op, ops, attrs, dims, dtype, md)

    def dot(self, batch: _Batch, ops, attrs, lanes: int, md) -> Instruction:
        first = batch.lanes[0]
        lhs, rhs = ops
        lhs_batched, rhs_batched = (s is not None for s in batch.sources)
        up = {k: tuple(d + 1 for d in attrs.get(k, ())) for k in
              ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims",
               "rhs_contracting_dims")}
        dims = (lanes,) + tuple(first.shape.dims)
        dtype = first.shape.dtype
        if lhs_batched and rhs_batched:
            attrs.update({"lhs_batch_dims": (0,) + up["lhs_batch_dims"],
                          "rhs_batch_dims": (0,) + up["rhs_batch_dims"],
                          "lhs_contracting_dims": up["lhs_contracting_dims"],
                          "rhs_contracting_dims": up["rhs_contracting_dims"]})
            return self.add("dot", (lhs, rhs), attrs, dims, dtype, md)
        if lhs_batched:  # (x_i @ W: the lanes are more rows of the left operand)
            attrs["lhs_contracting_dims"] = up["lhs_contracting_dims"]
            return self.add("dot", (lhs, self.operand(rhs)), attrs, dims, dtype, md)
        # (W @ x_i: the lanes come out after the left operand's free dimensions)
        attrs["rhs_contracting_dims"] = up["rhs_contracting_dims"]
        lhs = self.operand(lhs)
        free = lhs.shape.rank - len(attrs.get("lhs_contracting_dims", ()))
        out = list(first.shape.dims[:free]) + [lanes] + list(first.shape.dims[free:])
        product = self.add("dot", (lhs, rhs), attrs, out, dtype, md)
        perm = (free,) + tuple(range(free)) + tuple(range(free + 1, len(out)))
        return self.add("transpose", (product,), {"dimensions": perm}, dims, dtype, md)

    def concatenate(self, inst: Instruction, found: list) -> Instruction:
        """``inst`` with each run of lanes ``_stack_runs`` found a transpose and reshape."""
        axis = inst.attrs["dimensions"][0]
        pieces: list[Instruction] = []
        runs = {i: (n, batch, lane) for i, n, batch, lane in found}
        i = 0
        md = inst.metadata
        while i < len(inst.operands):
            if i not in runs:
                pieces.append(self.operand(inst.operands[i]))
                i += 1
                continue
            n, batch, lane = runs[i]
            x = self.lanes_of((batch, lane, 1), n, md)
            dims = list(x.shape.dims)
            perm = tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, len(dims)))
            if perm != tuple(range(len(dims))):
                x = self.add("transpose", (x,), {"dimensions": perm}, [dims[p] for p in perm],
                             x.shape.dtype, md)
            merged = dims[1:]
            merged[axis] *= n
            pieces.append(self.add("reshape", (x,), {}, merged, x.shape.dtype, md))
            i += n
        if len(pieces) == 1:
            return pieces[0]
        return self.add("concatenate", pieces, {"dimensions": (axis,)}, inst.shape.dims,
                        inst.shape.dtype, md)


def _schedule(entry: Computation, batches: list[_Batch], taken: dict, position: dict):
    """Batched values and the instructions left, operands first (Kahn's algorithm, the earliest
    in the program first)."""
    kept = [b for b in batches if b.kept]
    node_of = {m: b for b in kept for m in b.lanes}
    nodes: list = kept + [i for i in entry.instructions if i not in taken]
    pending: dict[int, int] = {}
    after: dict[int, list] = defaultdict(list)
    rank = {}
    for n in nodes:
        if isinstance(n, _Batch):
            rank[id(n)] = min(position[m] for m in n.lanes)
            needs = dict.fromkeys(node_of.get(o, o) for m in n.lanes for o in m.operands
                                  if taken.get(o, (None,))[0] is not n)
        else:
            rank[id(n)] = position[n]
            needs = dict.fromkeys(node_of.get(o, o) for o in n.operands)
        pending[id(n)] = len(needs)
        for x in needs:
            after[id(x)].append(n)
    ready = [(rank[id(n)], k, n) for k, n in enumerate(nodes) if not pending[id(n)]]
    heapq.heapify(ready)
    order = []
    count = len(nodes)
    serial = count
    while ready:
        _, _, n = heapq.heappop(ready)
        order.append(n)
        for u in after[id(n)]:
            pending[id(u)] -= 1
            if not pending[id(u)]:
                serial += 1
                heapq.heappush(ready, (rank[id(u)], serial, u))
    if len(order) != count:
        return None  # (a cycle: cannot happen for independent lanes; left unbatched)
    return order


def batch_alike(module: Module):
    """The pass: (module, rewrite counts, decisions)."""
    entry = module.entry
    counts: Counter = Counter()
    if not any(i.opcode == "slice" for i in entry.instructions):
        return module, counts, []
    taken: dict[Instruction, tuple[_Batch, int]] = {}
    seeds = _seed_batches(entry, taken)
    if not seeds:
        return module, counts, []
    users: dict[Instruction, list[Instruction]] = defaultdict(list)
    for inst in entry.instructions:
        for o in dict.fromkeys(inst.operands):
            users[o].append(inst)
    batches = _grow(seeds, taken, users)
    _prune(batches, taken, users)
    kept = [b for b in batches if b.kept and b.seed is None]
    if not kept:
        return module, counts, []
    position = {inst: i for i, inst in enumerate(entry.instructions)}
    order = _schedule(entry, batches, taken, position)
    if order is None:
        return module, counts, []
    builder = ComputationBuilder(entry.name, NameUniquer.from_names(
        i.name for i in entry.instructions))
    mapping: dict[Instruction, Instruction] = {}
    emit = _Emitter(builder, mapping, taken)
    for n in order:
        if isinstance(n, _Batch):
            emit.value[id(n)] = emit.batched(n)
            continue
        runs = _stack_runs(n, taken) if n.opcode == "concatenate" else None
        if runs:
            mapping[n] = emit.concatenate(n, runs)
            counts["concatenations of lanes"] += 1
            continue
        mapping[n] = builder.adopt(with_operands(n, [emit.operand(o) for o in n.operands]))
    decisions = []
    for b in kept:
        first = b.lanes[0]
        md = first.metadata
        location = md.location if md is not None else ""
        value = emit.value[id(b)]
        counts[f"batched {first.opcode}"] += 1
        decisions.append(FusionDecision(
            producer=first.name, consumer=value.name, fused=False, reason="BATCHED_ALIKE",
            message=(f"{REASONS['BATCHED_ALIKE']}: {len(b.lanes)} {first.opcode}s "
                     f"(%{first.name} ... %{b.lanes[-1].name}) as one "
                     f"{value.shape.to_text(False)} %{value.name}"),
            producer_location=location, consumer_location=location, fusion=value.name))
    root = entry.root
    new_root = mapping[root] if root in mapping else emit.unstack(root)
    return replace_entry(module, builder.build(new_root)), counts, decisions


__all__ = ["batch_alike", "REASONS", "MIN_LANES"]
