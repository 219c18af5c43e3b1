"""Dot canonicalisation, as XLA's DotDecomposer and DotDimensionMerger and the dot half of its
TransposeFolding do: each dot is brought as close to one GEMM, (batch, M, K) x (batch, K, N),
as it goes without copying data.

- A batch dimension that one operand only broadcasts (``x @ w`` for a stack ``x``: NumPy's
  matmul broadcasts ``w`` over the stack) is no batch dimension of the product: it becomes a
  free dimension of the other operand, part of the GEMM's M (or N). The broadcast is never
  materialised and one large GEMM replaces many small ones. Where the product would come out
  with its dimensions in another order, the operands swap places (a product's transpose is the
  swapped product); where neither order is the dot's, the fold is made only if transposing the
  result moves fewer bytes than the broadcast it saves.
- Adjacent dimensions of one role (batch, contracting, one operand's free dimensions), in the
  same order on both sides, merge into one by reshapes of contiguous (row-major) data, and a
  size-1 batch dimension on its own is dropped, where no reshape costs a copy: each operand
  reshaped is itself a reshape, a broadcast, a small (folded) constant, or a loop-fusible value
  only the dot reads (the reshape joins its kernel), and every user of the product fuses the
  reshape back. Elsewhere the dot keeps its dimensions: the library call reads
  them in place, as views (backends/library_dot.py).
- A transpose feeding a dot folds into the dot's dimension numbers where the dot then reads the
  transpose's operand in place (``reads_in_place``: BLAS's transpose flags, strided batches).
  Elsewhere the transpose stays, a copy that fuses with its producer.

Every decision is a FusionDecision whose reason ``REASONS`` words; every rewrite is counted
under a rule name. One walk over the computation, a bounded amount of work per dot (its
dimensions)."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from ..ir.builder import ComputationBuilder
from ..ir.nodes import Instruction, Module
from ..ir.ops import OPS, GroupOp
from ..ir.shapes import Shape
from ..profiler.events import FusionDecision
from .constant_folding import MAX_FOLDED_ELEMENTS
from .rewriter import replace_entry, rewrite_computation

REASONS = {
    "DOT_TRANSPOSE_FOLDED": "the dot reads the transpose's operand in place (BLAS's transpose "
                            "flags)",
    "DOT_TRANSPOSE_KEPT": "the transpose stays a copy: the dot could not read its operand in "
                          "place",
    "DOT_BROADCAST_FOLDED": "batch dimensions the operand only broadcasts fold into the GEMM's "
                            "rows or columns",
    "DOT_BROADCAST_KEPT": "the broadcast stays: folding its batch dimensions would cost more "
                          "than it saves",
    "DOT_DIMENSIONS_MERGED": "adjacent dimensions merge into one, size-1 batch dimensions go (a "
                             "reshape of contiguous data, no copy)",
    "DOT_MERGE_WOULD_COPY": "adjacent dimensions stay apart: merging them would copy a value "
                            "(BLAS reads them in place instead)",
}
# the decisions that changed the dot (FusionDecision.fused)
APPLIED = frozenset({"DOT_TRANSPOSE_FOLDED", "DOT_BROADCAST_FOLDED", "DOT_DIMENSIONS_MERGED"})

RULE_TRANSPOSE = (
    "dot(transpose(x), y) -> dot(x, y), the dimension numbers renumbered (transpose folding)"
)
RULE_BROADCAST = "dot over batch dimensions an operand only broadcasts -> one GEMM (M or N grows)"
RULE_MERGE = "dot: adjacent dimensions merged, size-1 batch dimensions dropped, by reshapes"


# ---- reading an operand in place -----------------------------------------------------------
def reads_in_place(dims, groups) -> bool:
    """Can a GEMM read a row-major array of shape ``dims`` as a stack of matrices, ``groups``
    being (batch dims, row dims, column dims), without a copy? Each group's dims must merge as a
    view, and one of the matrix's two strides must be 1 (its transpose flag covers the other):
    library_dot views an operand so, and NumPy's matmul and strided-batched GEMMs take any batch
    and leading-dimension strides."""
    if 0 in dims:
        return True  # nothing to read
    strides, step = [0] * len(dims), 1
    for d in reversed(range(len(dims))):
        strides[d], step = step, step * dims[d]
    merged = []
    for group in groups:
        live = [d for d in group if dims[d] != 1]
        if any(strides[a] != dims[b] * strides[b] for a, b in zip(live, live[1:])):
            return False
        merged.append(strides[live[-1]] if live else 1)
    return 1 in merged[1:]


def side_groups(side: str, batch, contracting, rank: int) -> list[list[int]]:
    """The (batch, rows, columns) dims of a dot operand as library_dot views it: the left one
    (batch, free, contracting), the right one (batch, contracting, free)."""
    free = [d for d in range(rank) if d not in batch and d not in contracting]
    inner = [free, list(contracting)] if side == "lhs" else [list(contracting), free]
    return [list(batch)] + inner


def transpose_source(t: Instruction) -> tuple[Instruction, list[int]]:
    """(source, perm) of the chain of transposes ending in ``t``: dim d of ``t`` is dim perm[d]
    of source."""
    perm = list(range(t.shape.rank))
    while t.opcode == "transpose":
        inner = t.attrs["dimensions"]
        perm = [inner[p] for p in perm]
        t = t.operands[0]
    return t, perm


def fold_transpose(side: str, t: Instruction, batch, contracting):
    """(source, batch, contracting) of a dot operand ``t`` read through its chain of transposes,
    or (None, why) where folding is not valid or would make the dot copy."""
    source, perm = transpose_source(t)
    free = [perm[d] for d in range(t.shape.rank) if d not in batch and d not in contracting]
    if free != sorted(free):  # the product lays the free dimensions out in operand order
        return None, "its free dimensions would come out of the product in another order"
    new_batch = tuple(perm[d] for d in batch)
    new_contracting = tuple(perm[d] for d in contracting)
    groups = side_groups(side, new_batch, new_contracting, source.shape.rank)
    if not reads_in_place(source.shape.dims, groups):
        return None, (f"BLAS would copy %{source.name} {source.shape.to_text(False)} read in "
                      "that order")
    return source, new_batch, new_contracting


# ---- one operand, as the canonicaliser rewrites it -----------------------------------------
@dataclass
class _Side:
    name: str  # "lhs" or "rhs"
    inst: Instruction  # the operand (a transpose's operand, once folded)
    old: Instruction | None  # the original program's operand, for its users (None once folded)
    batch: list[int]
    contracting: list[int]
    labels: list  # per dim: the product dimension it makes (("b", i) for batch pair i)
    dims: list[int] = field(default_factory=list)
    repeated_from: Instruction | None = None  # inst is broadcast(repeated_from) ...
    broadcast_dims: list[int] = field(default_factory=list)  # ... along these dims
    dropped: bool = False  # dims of the broadcast dropped: the operand is a new broadcast

    @classmethod
    def of(cls, name, inst, old, batch, contracting) -> _Side:
        side = cls(name, inst, old, list(batch), list(contracting), [])
        side.reset(inst, batch, contracting)
        return side

    def reset(self, inst, batch, contracting) -> None:
        self.inst, self.batch, self.contracting = inst, list(batch), list(contracting)
        self.dims = list(inst.shape.dims)
        tag = "l" if self.name == "lhs" else "r"
        self.labels = [(tag, d) for d in range(len(self.dims))]
        for i, d in enumerate(self.batch):
            self.labels[d] = ("b", i)
        for j, d in enumerate(self.contracting):
            self.labels[d] = ("c", j)
        repeats = inst.opcode == "broadcast"
        self.repeated_from = inst.operands[0] if repeats else None
        self.broadcast_dims = list(inst.attrs["dimensions"]) if repeats else []

    def free(self, extra=()) -> list[int]:
        """Free dims in order, with the dims of batch pairs ``extra`` counted as free."""
        become = {self.batch[i] for i in extra}
        return [d for d in range(len(self.dims))
                if (d not in self.batch and d not in self.contracting) or d in become]

    def repeats(self, i: int) -> bool:
        """Is the operand a broadcast along batch pair ``i``'s dimension?"""
        return self.repeated_from is not None and self.batch[i] not in self.broadcast_dims

    def drop(self, dims) -> None:
        """Remove broadcast dims (the broadcast no longer makes them)."""
        keep = [d for d in range(len(self.dims)) if d not in dims]
        new = {d: k for k, d in enumerate(keep)}
        self.dims = [self.dims[d] for d in keep]
        self.labels = [self.labels[d] for d in keep]
        self.batch = [new[d] for d in self.batch if d in new]
        self.contracting = [new[d] for d in self.contracting]
        self.broadcast_dims = [new[d] for d in self.broadcast_dims]
        self.dropped = True

    def operand(self, b: ComputationBuilder) -> Instruction:
        if not self.dropped:
            return self.inst
        source = self.repeated_from
        if self.dims == list(source.shape.dims) and self.broadcast_dims == list(
                range(len(self.dims))):
            return source
        shape = Shape(source.shape.dtype, tuple(self.dims))
        return b.add("broadcast", (source,), {"dimensions": tuple(self.broadcast_dims)}, shape,
                     self.inst.metadata)


def _dims_text(dims) -> str:
    return "{" + ",".join(str(d) for d in dims) + "}"


def _loc(inst: Instruction) -> str:
    return inst.metadata.location if inst.metadata is not None else ""


class _DotRewriter:
    """Canonicalises the dots of one computation (``users``: the original program's)."""

    def __init__(self, users: dict[int, list[Instruction]], root: Instruction):
        self.users = users
        self.root = root
        self.decisions: list[FusionDecision] = []
        self.counts: Counter = Counter()

    def decide(self, producer, dot, code: str, detail: str, saved: int = 0) -> None:
        self.decisions.append(FusionDecision(
            producer=producer.name, consumer=dot.name, fused=code in APPLIED, reason=code,
            message=f"{REASONS[code]}: {detail}", producer_location=_loc(producer),
            consumer_location=_loc(dot), bytes_saved=int(saved)))

    def only_reader(self, value: Instruction | None, dot: Instruction) -> bool:
        """Is ``dot`` the only instruction reading ``value`` (once, or as both operands)? A
        constant amount of work however many users ``value`` has."""
        readers = self.users.get(id(value), []) if value is not None else []
        return 0 < len(readers) <= 2 and all(u is dot for u in readers)

    # ---- whether a reshape costs a copy ------------------------------------------------------
    def reshape_is_free(self, side: _Side, dot: Instruction) -> tuple[bool, str]:
        x = side.inst
        if x.opcode == "constant":  # folded where small; a kernel copying it on every call else
            if x.shape.size <= MAX_FOLDED_ELEMENTS:
                return True, ""
            return False, f"%{x.name} is a large constant: reshaping it would copy it every call"
        # a reshape collapses into another reshape, joins a broadcast's or an iota's kernel, or
        # joins the kernel of a fusible value only the dot reads
        if side.dropped or x.opcode in GroupOp.SAME_ELEMENTS | GroupOp.KNOWN_VALUES:
            return True, ""
        fusible = OPS[x.opcode].fusion in ("elementwise", "loop") and (
            x.opcode != "dynamic-update-slice")  # (it stays the root of its fusion)
        if fusible and self.only_reader(side.old, dot):
            return True, ""
        why = "is read by others too" if fusible else f"is a {x.opcode}"
        return False, f"%{x.name} {why}: reshaping it would copy it"

    def product_reshape_is_free(self, dot: Instruction) -> tuple[bool, str]:
        if dot is self.root:
            return False, f"%{dot.name} is the computation's result: reshaping it would copy it"
        for u in self.users.get(id(dot), []):
            if OPS[u.opcode].fusion == "none":
                return False, (f"%{u.name} ({u.opcode}) reads the product: reshaping it would "
                               "copy it")
        return True, ""

    # ---- the rewrite -------------------------------------------------------------------------
    def visit(self, inst: Instruction, ops: list[Instruction], b: ComputationBuilder):
        if inst.opcode != "dot" or not isinstance(inst.shape, Shape):
            return None
        a = inst.attrs
        lhs = _Side.of("lhs", ops[0], inst.operands[0], a.get("lhs_batch_dims", ()),
                       a.get("lhs_contracting_dims", ()))
        rhs = _Side.of("rhs", ops[1], inst.operands[1], a.get("rhs_batch_dims", ()),
                       a.get("rhs_contracting_dims", ()))
        out_labels = [("b", i) for i in range(len(lhs.batch))]
        out_labels += [lhs.labels[d] for d in lhs.free()] + [rhs.labels[d] for d in rhs.free()]
        size = dict(zip(out_labels, inst.shape.dims))
        changed = False
        for side in (lhs, rhs):
            changed |= self.fold_transposes(side, inst)
        product_free, product_why = self.product_reshape_is_free(inst)
        folded, swap, reshaped = self.fold_broadcasts(lhs, rhs, inst, out_labels, size,
                                                      product_free)
        changed |= folded
        first, second = (rhs, lhs) if swap else (lhs, rhs)
        labels = ([first.labels[d] for d in first.batch] + [first.labels[d] for d in first.free()]
                  + [second.labels[d] for d in second.free()])
        reshaped = reshaped or labels != out_labels
        out_ok = (product_free or reshaped, product_why)
        merged = self.merge(first, second, inst, out_ok, b)
        if not changed and merged is None:
            return None
        return self.product(first, second, merged, inst, labels, out_labels, size, b)

    def fold_transposes(self, side: _Side, dot: Instruction) -> bool:
        t = side.inst
        if t.opcode != "transpose":
            return False
        folded = fold_transpose(side.name, t, side.batch, side.contracting)
        if folded[0] is None:
            self.decide(t, dot, "DOT_TRANSPOSE_KEPT", f"%{t.name} {folded[1]}")
            return False
        source, batch, contracting = folded
        saved = t.shape.nbytes * (2 if self.only_reader(side.old, dot) else 1)
        self.decide(t, dot, "DOT_TRANSPOSE_FOLDED",
                    f"%{dot.name} reads %{source.name} {source.shape.to_text(False)} with its "
                    f"{side.name} contracting dims {_dims_text(contracting)}", saved)
        self.counts[RULE_TRANSPOSE] += 1
        labels = side.labels
        side.reset(source, batch, contracting)
        perm_of = {p: d for d, p in enumerate(transpose_source(t)[1])}
        side.labels = [labels[perm_of[d]] for d in range(len(side.dims))]
        side.old = None
        return True

    def fold_broadcasts(self, lhs: _Side, rhs: _Side, dot, out_labels, size, product_free):
        """(whether any fold was made, whether the operands swap, whether the product needs a
        reshape or transpose back to the dot's shape)."""
        nb = len(lhs.batch)
        into_lhs = [i for i in range(nb) if rhs.repeats(i)]  # rhs repeats: lhs's dims stay
        into_rhs = [i for i in range(nb) if i not in into_lhs and lhs.repeats(i)]
        if not into_lhs and not into_rhs:
            return False, False, False
        candidates = [(into_lhs, into_rhs)]
        if into_lhs and into_rhs:
            candidates += [(into_lhs, []), ([], into_rhs)]
        broadcast_bytes = {"lhs": lhs.inst.shape.nbytes, "rhs": rhs.inst.shape.nbytes}
        out_bytes = dot.shape.nbytes
        best = None
        for to_lhs, to_rhs in candidates:
            folded = set(to_lhs) | set(to_rhs)
            batch = [("b", i) for i in range(nb) if i not in folded]
            lfree = [lhs.labels[d] for d in lhs.free(to_lhs)]
            rfree = [rhs.labels[d] for d in rhs.free(to_rhs)]
            saved = (broadcast_bytes["rhs"] if to_lhs else 0) + (
                broadcast_bytes["lhs"] if to_rhs else 0)
            for swap in (False, True):
                labels = batch + (rfree + lfree if swap else lfree + rfree)
                moves = _non_unit(labels, size) != _non_unit(out_labels, size)
                reshaped = labels != out_labels
                cost = out_bytes if moves or (reshaped and not product_free) else 0
                # the cheapest; of equals, one that only reshapes the product (no transpose)
                if cost <= saved and (best is None or (cost, moves) < best[0]):
                    best = ((cost, moves), to_lhs, to_rhs, swap, reshaped or moves)
        _, to_lhs, to_rhs, swap, reshaped = best if best is not None else (None, [], [], 0, 0)
        for side, idx, made in ((rhs, into_lhs, to_lhs), (lhs, into_rhs, to_rhs)):
            if idx and not made:
                self.decide(side.inst, dot, "DOT_BROADCAST_KEPT",
                            f"the product of %{dot.name} would come out transposed "
                            f"({out_bytes:,} bytes to move), more than %{side.inst.name} "
                            f"({side.inst.shape.nbytes:,} bytes)")
        if best is None:
            return False, False, False
        for grows, repeats, idx, gemm in ((lhs, rhs, to_lhs, "M (rows)"),
                                          (rhs, lhs, to_rhs, "N (columns)")):
            if not idx:
                continue
            bcast, old = repeats.inst, repeats.old
            saved = bcast.shape.nbytes * (2 if self.only_reader(old, dot) else 1)
            self.decide(bcast, dot, "DOT_BROADCAST_FOLDED",
                        f"%{bcast.name} only repeats %{repeats.repeated_from.name} along batch "
                        f"dims {_dims_text(repeats.batch[i] for i in idx)}: they join the "
                        f"GEMM's {gemm}" + (", the operands swapped" if swap else ""), saved)
            self.counts[RULE_BROADCAST] += 1
        drop_r = [rhs.batch[i] for i in to_lhs]
        drop_l = [lhs.batch[i] for i in to_rhs]
        gone = set(to_lhs) | set(to_rhs)
        for side in (lhs, rhs):
            side.batch = [d for i, d in enumerate(side.batch) if i not in gone]
        if drop_r:
            rhs.drop(drop_r)
        if drop_l:
            lhs.drop(drop_l)
        return True, swap, reshaped

    def merge(self, first: _Side, second: _Side, dot, out_ok, b):
        """Merge adjacent dims and drop lone size-1 batch dims where no reshape copies: the two
        operands, each with a map from its dims to the merged operand's, or None."""
        runs = _runs(first, second)
        if not runs:
            return None
        ok = {"first": self.reshape_is_free(first, dot), "second": self.reshape_is_free(
            second, dot), "out": out_ok}
        joins = {"first": set(), "second": set()}
        drops = {"first": set(), "second": set()}
        for role, parties, pairs in runs:
            blocked = [p for p in parties if not ok[p][0]]
            if blocked:
                p = blocked[0]
                producer = dot if p == "out" else (first if p == "first" else second).inst
                self.decide(producer, dot, "DOT_MERGE_WOULD_COPY",
                            f"{role} dims of %{dot.name}: {ok[p][1]}")
                continue
            for party, dims in pairs:
                if len(dims) == 1:  # a lone size-1 batch dim
                    drops[party].update(dims)
                else:
                    joins[party].update(dims[:-1])  # dim d merges with d + 1
        if not any(joins.values()) and not any(drops.values()):
            return None
        operands = []
        for key, side in (("first", first), ("second", second)):
            segments = _segments(len(side.dims), joins[key], drops[key])
            x = side.operand(b)
            merged = _reshaped(x, segments, b, dot)
            if merged is not x:
                self.decide(side.inst, dot, "DOT_DIMENSIONS_MERGED",
                            f"%{dot.name} reads its {side.name} operand as "
                            f"{merged.shape.to_text(False)}: "
                            + "; ".join([f"dims {_dims_text(seg)} merged" for seg in segments
                                         if len(seg) > 1] + [f"size-1 dim {d} dropped"
                                                             for d in sorted(drops[key])]))
            operands.append((merged, {d: k for k, seg in enumerate(segments) for d in seg}))
        self.counts[RULE_MERGE] += 1
        return operands

    def product(self, first, second, merged, dot, labels, out_labels, size, b):
        md = dot.metadata
        if merged is None:
            merged = [(s.operand(b), {d: d for d in range(len(s.dims))}) for s in (first, second)]
        (x, xmap), (y, ymap) = merged
        batch = _pairs([xmap.get(d) for d in first.batch], [ymap.get(d) for d in second.batch])
        contracting = _pairs([xmap.get(d) for d in first.contracting],
                             [ymap.get(d) for d in second.contracting])
        attrs = dict(dot.attrs)
        if first.name == "rhs" and "operand_precision" in attrs:  # the operands swapped
            attrs["operand_precision"] = tuple(reversed(attrs["operand_precision"]))
        attrs["lhs_batch_dims"], attrs["rhs_batch_dims"] = (tuple(p[0] for p in batch),
                                                            tuple(p[1] for p in batch))
        attrs["lhs_contracting_dims"] = tuple(p[0] for p in contracting)
        attrs["rhs_contracting_dims"] = tuple(p[1] for p in contracting)
        if not attrs["lhs_batch_dims"]:
            del attrs["lhs_batch_dims"], attrs["rhs_batch_dims"]
        dims = [x.shape.dims[p[0]] for p in batch]
        dims += [x.shape.dims[k] for k in _free(x.shape.rank, batch, contracting, 0)]
        dims += [y.shape.dims[k] for k in _free(y.shape.rank, batch, contracting, 1)]
        dtype = dot.shape.dtype
        result = b.add("dot", (x, y), attrs, Shape(dtype, tuple(dims)), md)
        if _non_unit(labels, size) == _non_unit(out_labels, size):
            return _reshape_to(result, dot.shape, b, md)
        unmerged = _reshape_to(result, Shape(dtype, tuple(size[lab] for lab in labels)), b, md)
        target = [lab for lab in out_labels if lab in labels]
        perm = tuple(labels.index(lab) for lab in target)
        moved = b.add("transpose", (unmerged,), {"dimensions": perm}, metadata=md)
        return _reshape_to(moved, dot.shape, b, md)


def _non_unit(labels, size) -> list:
    return [lab for lab in labels if size[lab] != 1]


def _pairs(xs, ys) -> list[tuple[int, int]]:
    """Pairs of merged dims, each once, in order (dropped dims: None)."""
    out: list[tuple[int, int]] = []
    for p in zip(xs, ys):
        if p not in out and None not in p:
            out.append(p)
    return out


def _free(rank, batch, contracting, k) -> list[int]:
    taken = {p[k] for p in batch} | {p[k] for p in contracting}
    return [d for d in range(rank) if d not in taken]


def _runs(first: _Side, second: _Side):
    """(role, parties, [(party, consecutive dims)]) for each run of two or more dims that could
    merge into one, and for each lone size-1 batch pair (which could go)."""
    runs = []

    def consecutive(pairs):  # maximal runs of pairs where both dims step by one
        run = [pairs[0]] if pairs else []
        for p in pairs[1:]:
            if all(p[k] == run[-1][k] + 1 for k in range(len(p))):
                run.append(p)
                continue
            yield run
            run = [p]
        if run:
            yield run

    for run in consecutive(list(zip(first.batch, second.batch))):
        if len(run) > 1 or first.dims[run[0][0]] == 1:
            runs.append(("batch" if len(run) > 1 else "size-1 batch", ("first", "second", "out"),
                         [("first", [p[0] for p in run]), ("second", [p[1] for p in run])]))
    pairs = sorted(zip(first.contracting, second.contracting))
    for run in consecutive(pairs):
        if len(run) > 1:
            runs.append(("contracting", ("first", "second"),
                         [("first", [p[0] for p in run]), ("second", [p[1] for p in run])]))
    for key, side in (("first", first), ("second", second)):
        for run in consecutive([(d,) for d in side.free()]):
            if len(run) > 1:
                runs.append((f"{side.name} free", (key, "out"), [(key, [p[0] for p in run])]))
    return runs


def _segments(rank: int, joins: set[int], drops: set[int]) -> list[list[int]]:
    segments: list[list[int]] = []
    for d in range(rank):
        if d in drops:
            continue
        if segments and d - 1 in joins:
            segments[-1].append(d)
        else:
            segments.append([d])
    return segments


def _reshaped(x: Instruction, segments, b, dot) -> Instruction:
    dims = tuple(math.prod(x.shape.dims[d] for d in seg) for seg in segments)
    if dims == x.shape.dims:
        return x
    return _reshape_to(x, Shape(x.shape.dtype, dims), b, x.metadata or dot.metadata)


def _reshape_to(x: Instruction, shape: Shape, b, md) -> Instruction:
    if x.shape.dims == shape.dims:
        return x
    source = x.operands[0] if x.opcode in GroupOp.RESHAPES else x
    if source.shape.dims == shape.dims:
        return source
    return b.add("reshape", (source,), shape=shape, metadata=md)


def canonicalize_dots(module: Module) -> tuple[Module, Counter, list[FusionDecision]]:
    """The module with its entry computation's dots canonicalised (loop bodies and branches: the
    pipeline runs on each as a module of its own), the rewrites counted and every decision."""
    entry = module.entry
    if not any(i.opcode == "dot" for i in entry.instructions):
        return module, Counter(), []
    users: dict[int, list[Instruction]] = {}
    for inst in entry.instructions:
        for o in inst.operands:
            users.setdefault(id(o), []).append(inst)
    rewriter = _DotRewriter(users, entry.root)
    new_entry, changed = rewrite_computation(entry, rewriter.visit)
    new = replace_entry(module, new_entry) if changed else module
    return new, rewriter.counts, rewriter.decisions
