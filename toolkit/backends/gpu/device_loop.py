"""Loops on the device: a while loop whose body is one CUDA graph runs trip after trip as
replays of that graph, into state buffers the loop owns, with no allocation, no re-pointing
and (for a known trip count) no predicate download per trip, as XLA:GPU's while thunk runs
its body's command buffer.

- **State.** Each state leaf the body computes anew has two buffers, owned by the loop and
  kept between calls; trips alternate between them (trip t reads set t % 2 and writes the
  other). A leaf the body writes in place (a dynamic-update-slice into its donated state, as a
  ``scan`` stacks its outputs) has one buffer, written trip after trip; a leaf it passes on
  unchanged (a loop invariant: the weights) is read where the caller keeps it.
- **Graphs.** The body's graph is bound once to each of the two sets (``GraphReplay
  .run_bound``: recorded, and checked bit for bit against a launch-by-launch run, as any
  program's graph is); every later trip of that parity is one ``cuGraphLaunch``. A call
  re-binds only when a loop invariant moved (a new weights array).
- **Entry and exit.** A call copies the initial state into the loop's buffers (the copy the
  loop makes of its state anyway) and the final state out into new buffers, which the caller
  keeps: the loop's own are reused by the next call.
- **Trip count.** With XLA's ``known_trip_count``, or a count its state gives at entry (a
  loop rolling nested: ``counted_loop``, two scalars read once), the body runs that many times
  and the condition is read once, after, to hold the count to its word. Otherwise the
  condition runs on the device and its predicate is downloaded before each trip (CUDA's
  conditional graph nodes would keep that on the device; not used yet).

A body that is not one graph (host steps, nested loops, a single launch) is not driven here:
``DeviceLoop.for_parts`` says so and the loop runs as before."""
from __future__ import annotations

from ...ir.queries import counted_loop
from ..control import entry_trip_count, overrun_error, passed_on
from .arrays import DeviceArray


class DeviceLoop:
    # the runner hands over the initial state as it is: the loop copies it into its own buffers
    copies_state = True
    driver = "device graph"  # (the profile's launch column)

    def __init__(self, inst, cond, body, known: int | None):
        self.inst, self.cond, self.body, self.known = inst, cond, body, known
        self.counted = counted_loop(inst) if known is None else None
        self.device = body.device
        plan = body.plan
        self.invariant = passed_on(inst.attrs["body"])
        # per state leaf: "new" (computed into the other set), "in_place" (written into its own
        # buffer) or "invariant" (never written)
        self.kinds = []
        for k, (arg, out) in enumerate(zip(plan.arg_slots, plan.out_slots)):
            self.kinds.append("invariant" if k in self.invariant else
                              "in_place" if out == arg else "new")
        self.sets: list[list] | None = None  # the two state sets, made on the first call
        self.bound: list = [None, None]  # per parity: (recording, its key, the state bound)
        self.trips = 0
        self.rebinds = 0

    @classmethod
    def for_parts(cls, inst, cond, body, known: int | None) -> "DeviceLoop | None":
        """The driver for this loop, or None where its body cannot be replayed as bound
        graphs: not one graph, or a result that is not its own leaf (state leaves swapped,
        a constant or one array returned twice)."""
        plan = body.plan
        if body._graph is None or len(plan.arg_slots) != len(plan.out_slots):
            return None
        args, outs = plan.arg_slots, plan.out_slots
        if len(set(outs)) != len(outs) or any(s in plan.constants for s in outs):
            return None
        invariant = passed_on(inst.attrs["body"])
        for k, (arg, out) in enumerate(zip(args, outs)):
            if out in args and out != arg:
                return None
            if k in invariant and out != arg:
                return None
        return cls(inst, cond, body, known)

    # ---- state ------------------------------------------------------------------------
    def _sets(self, leaves) -> list[list]:
        if self.sets is None:
            d = self.device
            a = [None if kind == "invariant" else d.empty(v.shape, v.dtype)
                 for kind, v in zip(self.kinds, leaves)]
            b = [d.empty(v.shape, v.dtype) if kind == "new" else x
                 for kind, v, x in zip(self.kinds, leaves, a)]
            self.sets = [a, b]
        return self.sets

    def _state(self, parity: int, leaves) -> list:
        return [v if kind == "invariant" else own
                for kind, v, own in zip(self.kinds, leaves, self.sets[parity])]

    # ---- running ----------------------------------------------------------------------
    def run(self, leaves, limit: int):
        """``(final state, trips)``: the state in new buffers the caller owns."""
        d = self.device
        a, _ = self._sets(leaves)
        for kind, v, own in zip(self.kinds, leaves, a):
            if kind != "invariant":
                d.copy_into(own, v)
        states = [self._state(0, leaves), self._state(1, leaves)]
        state, parity, trips = states[0], 0, 0
        known = self.known if self.counted is None else entry_trip_count(
            self.counted, leaves, d.download)  # (a nested rolled loop: two scalars read once)
        budget = known if known is not None else limit
        while trips < budget:
            if known is None and not bool(d.download(self._condition(state))):
                break
            state = self._trip(state, states, parity)
            parity ^= 1
            trips += 1
        if known is not None and bool(d.download(self._condition(state))):
            raise overrun_error(self.inst, known, self.counted is not None)
        self.trips = trips
        # the caller keeps what it gets: the loop's own buffers serve the next call
        return [d.copy(v) for v in state], trips

    def _trip(self, state, states, parity: int) -> list:
        """One trip from ``state`` (set ``parity``, where the last trip left it) into the other
        set: one graph launch once this parity is bound to these buffers."""
        bound = self.bound[parity]
        if bound is not None and bound[2] is state:
            recording, key, _ = bound
            if recording.key is key and self.body._graph.disabled is None:
                recording.graph.launch()
                self.body._graph.replays += 1
                return states[parity ^ 1]
        target = states[parity ^ 1]
        outcome = self.body._graph.run_bound(state, target)
        if outcome is None:  # the graph was turned off: this trip, and the rest, one by one
            results = self.body([DeviceArray(b, self.device, "loop state") for b in state])
            return [r._buffer for r in results]
        results, recording = outcome
        if recording is not None and all(r is t for r, t in zip(results, target)):
            self.bound[parity] = (recording, recording.key, state)
            self.rebinds += 1
            return target
        return results

    def _condition(self, state):
        (predicate,) = self.cond([DeviceArray(b, self.device, "loop state") for b in state])
        return predicate._buffer


__all__ = ["DeviceLoop"]
