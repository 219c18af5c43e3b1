"""What fusing may not do to a buffer written in place: a fusion rooted at a
dynamic-update-slice writes its window into its operand's buffer, so nothing fused into it may
read that buffer where the window may be written (it would read values the kernel has already
overwritten). A mixin of the fuser (fusion.py), asked before each producer joins a fusion."""
from __future__ import annotations

from ..ir.nodes import Instruction
from ..ir.ops import GroupOp
from ..ir.queries import reads_outside_update_window, reads_update_window
from .fusion_groups import is_fusible


class InPlaceHazards:
    """Needs the fuser's ``users``, ``options``, ``_cone_readers`` and ``_elsewhere``."""

    def reads_updated_buffer(self, x, user_groups) -> tuple[Instruction, Instruction] | None:
        """(destination, reader) when fusing ``x`` into a dynamic-update-slice's fusion among
        ``user_groups`` would make that fusion read the destination where the window may be
        written: other than exactly at the element written, or where the window provably is
        not (constant starts). Such a fusion cannot write its window in place. ``x`` itself may
        be the reader; when ``x`` is the update (or a start), the producers that would fuse
        along with it are looked through too (up to the instruction budget), so that the whole
        update runs as one kernel before the write (a stencil's slices and sums) rather than
        each reader as a kernel of its own. None when ``x`` may join."""
        for g in user_groups:
            root = g.members[0]
            if root.opcode != "dynamic-update-slice":
                continue
            destination = root.operands[0]
            if destination is x or destination.opcode == "constant":
                continue
            if any(o is x for o in root.operands[1:]):
                reader = self._cone_reader(x, root)
            else:
                reader = x if self._reads_window_elsewhere(x, root) else None
            if reader is not None:
                return destination, reader
        return None

    @staticmethod
    def _reads_window_elsewhere(inst: Instruction, dus: Instruction) -> bool:
        return (
            any(o is dus.operands[0] for o in inst.operands)
            and not reads_update_window(inst, dus)
            and not reads_outside_update_window(inst, dus)
        )

    def _cone_reader(self, start: Instruction, dus: Instruction) -> Instruction | None:
        """An instruction fusible along with ``start`` (walking up its operands through fusible,
        non-reduction producers, at most the instruction budget) that reads ``dus``'s
        destination where the window may be written; None if none is found."""
        key = (id(start), id(dus))
        if key in self._cone_readers:
            return self._cone_readers[key]
        destination = dus.operands[0]
        found = None
        # (the walk can only find a reader of the destination: where none of its readers reads
        # elsewhere than the window, there is none to look for)
        if not self.read_elsewhere_at_all(dus):
            self._cone_readers[key] = None
            return None
        stack, seen, budget = [start], set(), self.options.max_instructions
        while stack and budget > 0:
            inst = stack.pop()
            if id(inst) in seen or inst is destination:
                continue
            seen.add(id(inst))
            budget -= 1
            if (
                inst.opcode in GroupOp.PLUMBING
                or inst.opcode in GroupOp.GIVEN
                or inst.opcode in GroupOp.WRITE_INTO_OPERAND
                or inst.opcode == "reduce"
                or not is_fusible(inst)
            ):
                continue  # never fused into another kernel: a buffer of its own
            if self._reads_window_elsewhere(inst, dus):
                found = inst
                break
            stack.extend(inst.operands)
        self._cone_readers[key] = found
        return found

    def read_elsewhere_at_all(self, dus: Instruction) -> bool:
        """Does any reader of ``dus``'s destination read it where the window may be written?"""
        known = self._elsewhere.get(id(dus))
        if known is None:
            known = self._elsewhere[id(dus)] = any(
                u is not dus and self._reads_window_elsewhere(u, dus)
                for u in self.users.get(dus.operands[0], ()))
        return known

