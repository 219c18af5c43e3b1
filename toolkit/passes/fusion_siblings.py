"""Sibling multi-output fusion: fusions that would read the same input, or compute the same
values, become one kernel with several outputs, when neither needs the other's result and the
kernel stays within its parameter budget. A mixin of the fuser (fusion.py), run after the
producer-consumer decisions."""
from __future__ import annotations

from ..ir.ops import GroupOp
from .fusion_groups import ROOT_PATH, Paths, is_compute, is_free_to_duplicate


_RETRIED_MERGES = 64  # merges made again one at a time where all of them closed a cycle


def _reads_in_step(consumer, producer, operand: int) -> bool:
    """Does ``consumer`` read ``producer``'s members (``operand`` among them) only at the
    element it computes: through elementwise members at its output's own index, each member
    at its producer's? (Read at another element, say reversed, the merged kernel would compute
    it twice: once to write it, once for the reader.)"""
    root = ROOT_PATH
    if operand not in producer.ids:
        return False
    for m in consumer.members:
        for o in m.operands:
            if id(o) in producer.ids and id(o) not in consumer.ids:
                if producer.paths.get(id(o)) != {root} or m.opcode not in GroupOp.ELEMENTWISE \
                        or consumer.paths.get(id(m)) != {root}:
                    return False
    return True


def _reads_at_one_index(reader, source) -> bool:
    """Does ``reader`` read ``source``'s members (if at all) only through elementwise members
    each evaluated at one index? Merged into one kernel, each such read evaluates the member
    once per element of ``reader``; a slice or a member reached by several index paths (a
    stencil's) would evaluate it once per path."""
    for m in reader.members:
        if id(m) in source.ids:
            continue
        for o in m.operands:
            if id(o) in source.ids and id(o) not in reader.ids and (
                    m.opcode not in GroupOp.ELEMENTWISE or len(reader.paths.get(id(m), ())) > 1):
                return False
    return True


class SiblingMerging:
    """Merges the fuser's groups (``self.groups``, ``self.homes``, ``self.decide``,
    ``self.depends``, ``self.options`` are the fuser's)."""

    # ---- sibling reductions -------------------------------------------------------------
    def merge_siblings(self) -> None:
        reductions = [g for g in self.groups if g.heroes]
        # Only reductions that read a common operand can merge: find those pairs through an
        # index by operand (linear), not by testing every pair (quadratic in a long program).
        readers: dict[int, list[int]] = {}
        operands_by_id = {id(i): i for i in self.comp.instructions}
        for n, g in enumerate(reductions):
            for operand in g.external_operands():
                if not is_free_to_duplicate(operands_by_id[operand]):
                    readers.setdefault(operand, []).append(n)
        merged_into: dict[int, int] = {}

        def representative(n: int) -> int:
            while n in merged_into:
                n = merged_into[n]
            return n

        # Each reader of an operand is tried against the group that the readers before it
        # formed (linear in the readers, not every pair); a group at its parameter budget
        # gives way to a new one.
        for ns in readers.values():
            anchor = ns[0]
            for later in ns[1:]:
                result = self._merge_pair(reductions, representative(anchor),
                                          representative(later), merged_into, operands_by_id)
                if result == "full":
                    anchor = later
        self.groups = [g for g in self.groups if g.gid >= 0]

    def _merge_pair(self, reductions, i: int, j: int, merged_into, operands_by_id) -> str:
        """Merge sibling reductions ``i`` and ``j`` where they may share a kernel: "merged",
        "full" (the parameter budget), or "kept" (apart for another reason)."""
        if i == j:
            return "merged"
        (i, j) = (i, j) if i < j else (j, i)
        a, b = reductions[i], reductions[j]
        ha, hb = a.heroes[0], b.heroes[0]
        shared = {o for o in a.external_operands() & b.external_operands()
                  if not is_free_to_duplicate(operands_by_id[o])}
        if not shared:
            return "kept"
        if ha.operands[0].shape.dims != hb.operands[0].shape.dims or \
                ha.attrs["dimensions"] != hb.attrs["dimensions"]:
            self.decide(
                ha,
                hb,
                False,
                "DIFFERENT_SHAPES",
                f"%{ha.name} reduces {ha.operands[0].shape} "
                f"over {ha.attrs['dimensions']}, %{hb.name} {hb.operands[0].shape} over "
                f"{hb.attrs['dimensions']}",
            )
            return "kept"
        # What one pass saves is the shared input read once; what it costs is the two
        # chains interleaved in one loop (more streams, more registers live). Heads of an
        # attention layer share a mask as big as each head's own scores: apart, each reads
        # its scores in one stream and the mask from cache (measured: six merged heads ran
        # 30 % slower than six kernels).
        def nbytes(ids) -> int:
            return sum(operands_by_id[o].shape.nbytes for o in ids
                       if not is_free_to_duplicate(operands_by_id[o]))

        shared_bytes = nbytes(shared)
        own = max(nbytes(a.external_operands() - shared), nbytes(b.external_operands() - shared))
        if shared_bytes <= own:
            self.decide(ha, hb, False, "SMALL_SHARED_INPUT",
                        f"%{ha.name} and %{hb.name} share {shared_bytes:,} bytes of input, and "
                        f"one reads {own:,} bytes more alone: a kernel each streams its own")
            return "kept"
        parameters = (len((a.external_operands() | b.external_operands()) - a.ids - b.ids)
                      + len(a.heroes) + len(b.heroes))
        if parameters > self.options.max_parameters:
            self.decide(ha, hb, False, "BUDGET_PARAMETERS",
                        f"one kernel for %{ha.name} and %{hb.name} would take {parameters} "
                        f"operands and outputs (budget {self.options.max_parameters})")
            return "full"
        if self.depends(a, b) or self.depends(b, a):
            first, second = (ha, hb) if self.depends(b, a) else (hb, ha)
            self.decide(
                first,
                second,
                False,
                "WOULD_CREATE_CYCLE",
                f"%{second.name} needs the result of %{first.name}, so they cannot share one "
                "kernel",
            )
            return "kept"
        for m in b.members:
            a.add(m, b.paths.get(id(m), Paths({ROOT_PATH})))
            self.homes[id(m)] = [a if g is b else g for g in self.homes[id(m)]]
        b.gid = -1
        merged_into[j] = i
        self.decide(ha, hb, True, "SIBLING_MULTI_OUTPUT",
                    f"%{ha.name} and %{hb.name} both read the same input in one pass")
        return "merged"

    # ---- sibling loop fusions -------------------------------------------------------------
    def merge_loop_siblings(self) -> None:
        """Loop fusions that compute the same values merge into one multi-output loop fusion.
        A cheap producer read by several fusions is copied into each (fusion.py), so a chain
        of cheap steps that two outputs both need (a masked iteration's state and its
        counter, each written out) ran once per fusion: twice the arithmetic, the inputs read
        twice. Merged, the chain runs once per element and both outputs are written in the one
        pass (XLA's sibling multi-output fusion). Only fusions with the same output shape
        merge, never one that writes a window in place, and never where one needs the
        other's result."""
        loops = [g for g in self.groups if not g.heroes and g.gid >= 0
                 and g.members[0].opcode not in GroupOp.WRITE_INTO_OPERAND]
        merged_into: dict[int, int] = {}
        outputs = [1] * len(loops)  # the roots each (merged) fusion writes
        undo: list = []  # how to take back each merge, in order

        def representative(n: int) -> int:
            while n in merged_into:
                n = merged_into[n]
            return n

        # the loop fusions that share each computed member (an index by member: linear)
        sharing: dict[int, list[int]] = {}
        for n, g in enumerate(loops):
            for m in g.members:
                if is_compute(m) and not is_free_to_duplicate(m) and len(self.homes[id(m)]) > 1:
                    sharing.setdefault(id(m), []).append(n)
        pairs = []
        for ns in sharing.values():
            anchor = ns[0]
            for later in ns[1:]:
                pair = (representative(anchor), representative(later))
                if self._merge_loops(loops, *pair, merged_into, outputs, undo) == "kept":
                    anchor = later
                else:
                    pairs.append(pair)
        # A loop fusion and a loop fusion that reads its values at the same element (one
        # iteration of a Python loop and the next: a binary search's probes, a masked update)
        # merge too, the producer's values written out where others read them (XLA's
        # producer-consumer multi-output fusion): the consumer stops reading them back.
        position = {id(g): n for n, g in enumerate(loops)}
        for n, consumer in enumerate(loops):
            for operand in sorted(consumer.external_operands()):
                for home in self.homes.get(operand, ()):
                    k = position.get(id(home))
                    if k is None or home.gid < 0 or not _reads_in_step(consumer, home, operand):
                        continue
                    pair = (representative(k), representative(n))
                    if not _reads_at_one_index(loops[pair[0]], loops[pair[1]]):
                        # the producer's kernel (with what it merged before) reads the consumer
                        # too, at other elements (a stencil's next step through its slices):
                        # one kernel would recompute the consumer for each, compounding over
                        # the steps that merge in a chain
                        continue
                    if self._merge_loops(loops, *pair, merged_into, outputs, undo,
                                         producer=home) == "merged":
                        pairs.append(pair)
        # Each merge was checked against the two fusions' own reads; a path through a third,
        # multi-output kernel can still close a cycle between kernels. One check of the whole
        # kernel graph (linear); where it finds one, the merges are taken back and made again
        # one at a time, each kept only where the graph stays acyclic (rare: bounded).
        if undo and self._kernel_cycle():
            taken_back: set[int] = set()
            while undo:
                taken_back.add(id(self._unmerge(undo.pop(), merged_into, outputs, drop=False)))
            # (one filter of the decisions: removing each from the list was quadratic)
            self.decisions[:] = [d for d in self.decisions if id(d) not in taken_back]
            for pair in pairs[:_RETRIED_MERGES]:
                made = len(undo)
                pair = (representative(pair[0]), representative(pair[1]))
                self._merge_loops(loops, *pair, merged_into, outputs, undo)
                if len(undo) > made and self._kernel_cycle():  # (a merge made now closed one)
                    a, b = undo[-1][0], undo[-1][1]
                    self._unmerge(undo.pop(), merged_into, outputs)
                    self.decide(a.members[0], b.members[0], False, "WOULD_CREATE_CYCLE",
                                f"one kernel for %{a.members[0].name} and %{b.members[0].name} "
                                "would need the result of a kernel that needs its own")
        self.groups = [g for g in self.groups if g.gid >= 0]

    def _unmerge(self, entry, merged_into, outputs, drop: bool = True):
        """Take back one merge (``_merge_loops``' undo entry) and return its decision, which
        leaves the decisions unless ``drop`` is false (the caller then removes it)."""
        a, b, b_gid, size, ids, paths, behind, external, moved, i, j, decision = entry
        del a.members[size:]
        a.ids, a.paths, a.behind_broadcast, a._external = ids, paths, behind, external
        for homes, k, replaced in reversed(moved):
            if replaced:
                homes[k] = b
            else:
                homes.insert(k, b)
        b.gid = b_gid
        merged_into.pop(j, None)
        outputs[i] -= outputs[j]
        if drop:  # by identity, from the end, where the merge just taken back put it
            k = len(self.decisions) - 1
            while self.decisions[k] is not decision:
                k -= 1
            del self.decisions[k]
        return decision

    def _kernel_cycle(self) -> bool:
        """Do the kernels the groups make (and the instructions in none) depend on each other
        in a cycle? Kahn's algorithm over the kernel graph: linear in the program."""
        live = [g for g in self.groups if g.gid >= 0]
        number = {id(g): k for k, g in enumerate(live)}
        alone: dict[int, int] = {}  # an instruction in no live group -> its node
        homes = self.homes
        for inst in self.comp.instructions:
            if not any(g.gid >= 0 for g in homes.get(id(inst), ())):
                alone[id(inst)] = len(live) + len(alone)
        n = len(live) + len(alone)
        edges: list[set[int]] = [set() for _ in range(n)]
        indegree = [0] * n

        def reads(reader: int, operand) -> None:
            sources = [number[id(g)] for g in homes.get(id(operand), ()) if g.gid >= 0]
            for source in sources or [alone[id(operand)]]:
                if source != reader and reader not in edges[source]:
                    edges[source].add(reader)
                    indegree[reader] += 1

        for k, g in enumerate(live):
            for m in g.members:
                for o in m.operands:
                    if id(o) not in g.ids:
                        reads(k, o)
        for inst in self.comp.instructions:
            k = alone.get(id(inst))
            if k is not None:
                for o in inst.operands:
                    reads(k, o)
        ready = [k for k in range(n) if indegree[k] == 0]
        done = 0
        while ready:
            k = ready.pop()
            done += 1
            for r in edges[k]:
                indegree[r] -= 1
                if indegree[r] == 0:
                    ready.append(r)
        return done < n

    def _merge_loops(self, loops, i: int, j: int, merged_into, outputs, undo,
                     producer=None) -> str:
        """Merge loop fusions ``i`` and ``j``: siblings computing the same values, or, with
        ``producer`` (the group one of them reads at the same element), a producer and its
        consumer."""
        if i == j:
            return "merged"
        (i, j) = (i, j) if i < j else (j, i)
        a, b = loops[i], loops[j]
        ra, rb = a.members[0], b.members[0]  # each group's root: the value it was made for
        if ra.shape.dims != rb.shape.dims:
            return "kept"  # (different shapes: a loop fusion has one iteration space)
        shared = a.ids & b.ids
        members = len(a.ids | b.ids)
        parameters = (len((a.external_operands() | b.external_operands()) - a.ids - b.ids)
                      + outputs[i] + outputs[j])
        if parameters > self.options.max_parameters or members > self.options.max_instructions:
            self.decide(ra, rb, False, "BUDGET_PARAMETERS",
                        f"one kernel for %{ra.name} and %{rb.name} would take {parameters} "
                        f"operands and outputs and {members} instructions (budget "
                        f"{self.options.max_parameters} and {self.options.max_instructions})")
            return "kept"
        if producer is None and (self.depends(a, b) or self.depends(b, a)):
            first, second = (ra, rb) if self.depends(b, a) else (rb, ra)
            self.decide(first, second, False, "WOULD_CREATE_CYCLE",
                        f"%{second.name} needs the result of %{first.name}, so they cannot "
                        "share one kernel")
            return "kept"
        # (each member's homes change in one place, recorded to be taken back: a value that
        # thousands of fusions copy, a constant, has thousands of homes, and rebuilding or
        # copying its list at every merge was quadratic)
        moved: list[tuple[list, int, bool]] = []
        entry = [a, b, b.gid, len(a.members), set(a.ids), dict(a.paths), a.behind_broadcast,
                 None if a._external is None else set(a._external), moved, i, j]
        for m in b.members:
            a.add(m, b.paths.get(id(m), Paths({ROOT_PATH})))
            homes = self.homes[id(m)]  # (groups compare by identity: these are C-level scans)
            if b in homes:
                k = homes.index(b)
                replaced = a not in homes
                if replaced:
                    homes[k] = a
                else:
                    del homes[k]
                moved.append((homes, k, replaced))
        b.gid = -1
        merged_into[j] = i
        outputs[i] += outputs[j]
        computed = sum(1 for m in b.members if id(m) in shared and is_compute(m))
        if producer is not None:
            first, second = (ra, rb) if producer is a else (rb, ra)
            self.decide(first, second, True, "LOOP_PRODUCER_CONSUMER",
                        f"%{second.name} reads %{first.name} at the element it computes: one "
                        f"kernel computes both, and writes %{first.name} out where others read it")
        else:
            self.decide(ra, rb, True, "LOOP_MULTI_OUTPUT",
                        f"%{ra.name} and %{rb.name} both compute the same {computed} operations "
                        "per element: one kernel computes them once and writes both")
        entry.append(self.decisions[-1])
        undo.append(tuple(entry))
        return "merged"
