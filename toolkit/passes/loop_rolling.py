"""Loop rolling: an unrolled Python loop whose trips trace alike becomes an HLO ``while`` again.

A Python loop over columns (``for j in range(1, n): y[:, j] = a * x[:, j] + b * y[:, j - 1]``)
unrolls at trace time into one copy of its body per trip. When the trips are the same
instructions up to the offsets they read and write at, this pass rolls them back into a
``while`` whose body is one trip, as XLA's loop rolling does, so the rest of the compile costs
one trip instead of thousands:

- The trips must be consecutive in the entry computation, ``MIN_TRIPS`` or more of them, in a
  run of ``MIN_INSTRUCTIONS`` or more alike instructions (a short loop stays unrolled:
  unrolled, its trips fuse with each other, and compiling them costs little). The loop itself
  may be shorter than the run: the inner loop of a nest restarts its progression with every
  outer trip, so each inner loop rolls on its own. In a program of ``SHORT_LOOPS_FROM``
  instructions or more, a shorter loop also rolls where loops with the same body recur,
  ``MIN_INSTRUCTIONS`` in all: the inner loops of a triangular nest (``for i: for j in
  range(i, n):``) differ in trip count, so the nest is no alike run. Their index constants,
  starts and trip counts are loop state, not body constants, so they share one body, which
  the backend compiles once. A short loop of ``LONE_SHORT_LOOP`` instructions or more rolls
  there even alone: the inner loops of ``for i: for j: B[i, j] += A[i + 1:, i] @ B[i + 1:,
  j]`` read shorter slices on every outer trip, so no two share a body, yet each is alike
  within itself, and one trip compiles faster than hundreds of instructions.
- Every trip has the same opcodes, shapes and attributes (reduction regions alike up to names);
  what may differ is a ``slice``'s start (stride 1) and a scalar constant operand holding an
  integer, each in an arithmetic progression over the trips. The body computes them from the
  trip counter (a slice at a varying start becomes a ``dynamic-slice`` of the same sizes,
  which reads the same elements: a static slice is in bounds, and dynamic-slice clamps only
  starts that run past their operand). A float constant varies only through integers its
  type holds exactly (``float(j)``, converted from the counter bit for bit); any other must be
  equal in every trip: a computed ``0.1 * j`` would not round as Python's did.
- An operand is the same value in every trip (an invariant, carried in the loop state), a
  value of the same trip, or the value the previous trip made at the same place (carried; the
  first trip reads what the program made before the loop).
- No value of a trip is read after the next trip, except the last trip's, which the loop
  returns. Trips where one of these fails end the loop before them.
- The body writes a buffer (a ``dynamic-update-slice`` or ``scatter``) or reads at a varying
  offset: a loop of whole-array arithmetic is left to fusion.
- In a program of ``SHORT_LOOPS_FROM`` instructions or more, the dots of vectors whose length
  varies from trip to trip (``A[i, :j] @ A[:j, j]``) are first computed over whole rows with
  the products outside masked (``contraction_padding``), and the elementwise writes of row
  windows whose length varies likewise over whole rows (``window_padding``), so that the trips
  of a triangular nest are alike; a padded dot or write left in no loop goes back to what it
  was.

- A nest rolls from the inside out, one level a round (``MAX_NESTING``): once the inner loops
  are ``while`` loops (trip counts and bounds in their state), the trips of the loop around
  them are alike too, and roll with the inner loop in their body. An inner loop whose trip
  count differs from trip to trip (``for k in range(i + 1, j)``) loses its
  ``known_trip_count`` there; the CPU's native driver runs it inside the outer trip. Near a
  triangular nest's diagonal the inner loops run 2-7 trips (``TINY_TRIPS`` to ``MIN_TRIPS -
  1``): such a run rolls where its body is exactly one a longer loop rolled (``exact_key``),
  unless it lies beside a loop of its kind (then it is that loop's first or last trips), so
  that the trips around it are alike in the next round. A trip holding a rolled loop is tried
  at the period from that loop to the next (``_periods``).

Every rolled loop leaves a FusionDecision (``ROLLED_LOOP``) with its trips, its body size and
what varies, and carries XLA's ``known_trip_count``. Linear in the program's size for programs
without long alike runs; each candidate start looks at a few periods only."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np

from ..ir.builder import ComputationBuilder, NameUniquer
from ..ir.nodes import Computation, Instruction, Metadata, Module
from ..ir.ops import GroupOp
from ..ir.shapes import Shape
from ..ir.structural import exact_key
from ..profiler.events import FusionDecision
from .contraction_padding import PaddedDot, pad_contractions, padded_text
from .window_padding import PaddedWrite, pad_window_writes, padded_writes_text
from .loop_bodies import Loop, build_body, zeros_of
from .loop_trips import AlikeRuns, Tokens, classify, sketch, trip_agrees, trip_checks, varies
from .rewriter import replace_entry, with_operands

REASONS = {"ROLLED_LOOP": "rolled back into a while loop"}
MIN_TRIPS = 8
# (below this an unrolled loop compiles in a fraction of a second, and unrolled its trips run
# as one native program; rolled, each trip is a loop iteration)
MIN_INSTRUCTIONS = 2048
# Loops shorter than MIN_INSTRUCTIONS that recur (a triangular nest's inner loops) roll only in
# programs at least this long, where compiling them unrolled costs seconds (a covariance by
# columns, 58k instructions: 12 s unrolled, 5 s rolled). Rolled, a loop runs inside the native
# program for about 1 µs plus 60 ns a trip beyond its kernels, but its trips no longer fuse
# with each other: a Gram-Schmidt of 60 columns (33k instructions) runs in 0.41 ms rolled and
# 0.34 ms unrolled, and its first call takes 4.0 s instead of 7.2 s (measured side by side);
# the covariance runs faster rolled (1.1 ms against 4.0 ms). Below this size the program
# compiles in about a second either way, and unrolled it runs fastest.
SHORT_LOOPS_FROM = 8192
# A lone short loop (no other loop shares its body) of this many instructions or more rolls in
# a program of SHORT_LOOPS_FROM instructions: its own compile (tens of ms) costs less than
# fusing and emitting its trips unrolled (about 100 µs an instruction). PolyBench's trmm, 52k
# instructions in 60 such loops: first call 10.1 s unrolled, 5.1-5.6 s rolled (runs 0.9-2.1
# ms unrolled, 1.6 ms rolled, on this noisy 2-core machine); symm 7.4-7.8 s, then 4.1-4.6 s.
LONE_SHORT_LOOP = 384
MAX_PERIOD = 512  # instructions in one trip
# What a kind of loop body costs to compile beyond its instructions, in instructions left
# unrolled, when padding is weighed (a low bound: a body's own pipeline run and LLVM module
# took 30-50 ms here, syrk's 50 row loops 2.6 s of code generation, where an unrolled
# instruction costs about 100 µs). Padding that makes a nest's loops share a few bodies is
# kept by this measure even where it leaves more unrolled around them.
BODY_COST = 64
_CANDIDATES = 4  # periods tried at each start
MAX_NESTING = 4  # rounds of rolling: the levels of a loop nest that roll
# A run of this many trips or more (fewer than MIN_TRIPS) rolls where its body is exactly one
# a longer loop rolled (``_find_tiny_loops``): a triangular nest's corner
TINY_TRIPS = 2


def _plan(seq, index, last_use, i: int, period: int, trips: int,
          min_instructions: int = MIN_INSTRUCTIONS, min_trips: int = MIN_TRIPS) -> Loop | None:
    found = classify(seq, index, i, period)
    if found is None:
        return None
    classes, slice_starts = found
    # trips alike in everything (no index or constant moves, nothing written in place) are
    # not a loop this pass rolls: known from the first two trips, before the others are compared
    moves = any(varies(starts) for starts in slice_starts.values()) or any(
        cls[0] == "progression" for row in classes for cls in row)
    if not moves and not any(seq[i + c].opcode in GroupOp.WRITE_INTO_OPERAND
                              for c in range(period)):
        return None
    # Trip t + 1 joins the loop where it agrees with the first two trips and no value of trip
    # t outlives it (only the last trip's values are read after the loop). Both checked trip
    # by trip, stopping at the first that fails: a list built trip by trip (``np.stack([f(x[:,
    # j]) for j in ...])``) keeps every trip's value to the end, and comparing all 2,000 of its
    # trips from each start before finding that took 10 s.
    checks = trip_checks(period, classes, slice_starts)
    t = 0
    while t + 1 < trips:
        limit = i + (t + 2) * period
        base = i + t * period
        if any(last_use[base + q] >= limit for q in range(period)):
            break
        if t + 1 >= 2 and not trip_agrees(seq, index, base + period, t + 1, checks):
            break
        t += 1
    trips = t + 1
    if trips < min_trips or trips * period < min_instructions:
        return None
    carried = {cls[1] for row in classes for cls in row if cls[0] == "carried"}
    last = i + (trips - 1) * period
    end = i + trips * period
    returned = {q for q in range(period) if last_use[last + q] >= end}
    state = sorted(carried | returned)
    for q in state:
        shape = seq[i + q].shape
        if q not in carried and not isinstance(shape, Shape):
            return None  # (a returned tuple would need a first value to start from)
    invariants, seen = [], set()
    for row in classes:
        for cls in row:
            if cls[0] == "invariant" and id(cls[1]) not in seen:
                seen.add(id(cls[1]))
                invariants.append(cls[1])
    return Loop(i, period, trips, classes, slice_starts, state, carried, invariants)


def _periods(i: int, following: list[int], next_loop: list[int], n: int) -> list[int]:
    """The periods tried for trips starting at ``i``: the distances to the next few places
    with the same sketch, and, where a ``while`` follows within a period, the distance from
    it to the next one like it. A trip of a nest's outer loop holds loops rolled in the
    round before (``for i: for j: ...``): a few hundred instructions that repeat their own
    sketches inside, so the first places alike are inside the trip, and its loop is what
    repeats with the trip's period."""
    periods, j = [], following[i]
    while j < n and j - i <= MAX_PERIOD and len(periods) < _CANDIDATES:
        periods.append(j - i)
        j = following[j]
    w = next_loop[i]
    if w < n and w - i <= MAX_PERIOD and following[w] < n:
        period = following[w] - w
        if period <= MAX_PERIOD and period not in periods:
            periods.append(period)
    return periods


def _find_loops(seq, index, last_use, codes: list[int], tokens: Tokens) -> list[Loop]:
    """``codes``: each instruction's sketch, as an int; ``tokens``: its full token, as an int
    (computed for the instructions of candidate runs only). Short loops (``Loop.short``) are
    candidates in programs of ``SHORT_LOOPS_FROM`` instructions or more."""
    short_loops = len(seq) >= SHORT_LOOPS_FROM
    n = len(seq)
    code_runs = AlikeRuns(codes.__getitem__, np.array(codes, np.int64))
    token_runs = AlikeRuns(tokens.at, tokens.array, tokens.fill)
    following: list[int] = [n] * n  # the next position with the same sketch
    next_loop: list[int] = [n] * n  # the next ``while`` at or after each position
    seen: dict[int, int] = {}
    for k in range(n - 1, -1, -1):
        following[k] = seen.get(codes[k], n)
        seen[codes[k]] = k
        next_loop[k] = k if seq[k].opcode == "while" else next_loop[k + 1] if k + 1 < n else n
    loops = []
    i = 0
    run_end = 0  # the end of the alike run the last rolled loop was found in
    while i + MIN_TRIPS <= n:
        found, skip = None, 1
        short = None  # (period, trips) of the first candidate too short to roll on its own
        for period in _periods(i, following, next_loop, n):
            if found is not None:
                break
            if (n - i) // period < MIN_TRIPS:
                continue
            # the trips a loop needs at this period: the last of them must start alike too
            # (one comparison rules out most candidates before any period is compared)
            # (in a run where a loop rolled already, the rest of the run is long enough)
            in_run = i < run_end
            if i + MIN_TRIPS * period > n or codes[i + (MIN_TRIPS - 1) * period] != codes[i]:
                continue
            trips = code_runs.trips(i, period, n)
            if trips < MIN_TRIPS:
                continue
            alike_until = i + trips * period
            # the run's full tokens: its trips must agree on attributes and operands too
            trips = token_runs.trips(i, period, trips)
            if trips < MIN_TRIPS:
                continue
            if trips * period < MIN_INSTRUCTIONS and not in_run:
                if short is None and short_loops:
                    short = (period, trips)
                continue
            # Inside a long alike run, a loop of fewer instructions rolls too: it is the inner
            # loop of a nest (``for i: for j:``) whose trips restart their progression with
            # every outer trip; each inner loop rolls, rather than the nest staying unrolled.
            found = _plan(seq, index, last_use, i, period, trips, MIN_TRIPS * period)
            if found is not None:
                run_end = max(run_end, alike_until)
            if found is None:
                skip = max(skip, period)  # (a run whose first trip reads what no other does
                # rolls from its second trip: that start is tried next)
        if found is None and short is not None:
            # too short alone; it rolls if loops like it recur (roll_loops counts them): the
            # inner loops of a triangular nest (``for i: for j in range(i, n):``) differ in
            # their trip counts, so the nest is no long alike run, but each inner loop is
            found = _plan(seq, index, last_use, i, short[0], short[1], MIN_TRIPS * short[0])
            if found is not None:
                found.short = True
            else:
                skip = max(skip, short[0])
        if found is not None:
            loops.append(found)
            i = found.start + found.trips * found.period
        else:
            i += skip
    return loops


def _find_tiny_loops(seq, index, last_use, tokens: Tokens, loops: list[Loop]) -> list[Loop]:
    """Runs of ``TINY_TRIPS`` to ``MIN_TRIPS - 1`` trips, outside ``loops``, of a kind one of
    them has (``_kind``): the corner of a triangular nest, whose inner loops run 2-7 trips
    (``for k in range(i + 1, j)`` near the diagonal). Each is a candidate only:
    ``_roll_once`` keeps those whose body is exactly one a loop rolled (``exact_key``), so
    that the trips around them become alike and roll in the next round."""
    kinds: dict[tuple[int, int], set] = {}  # (period, first token) -> kinds
    for loop in loops:
        kinds.setdefault((loop.period, tokens.at(loop.start)), set()).add(loop.kind)
    if not kinds:
        return []
    by_first: dict[int, list[int]] = {}
    for period, first in kinds:
        by_first.setdefault(first, []).append(period)
    covered = sorted((loop.start, loop.start + loop.trips * loop.period, loop.kind)
                     for loop in loops)
    found, n, i, c = [], len(seq), 0, 0
    while i < n:
        if c < len(covered) and i >= covered[c][0]:
            i, c = max(i, covered[c][1]), c + 1
            continue
        end = covered[c][0] if c < len(covered) else n
        # (trips next to a loop of their kind are its own first or last trips, left out of it
        # because they read what the program made before it or is read after it: they stay)
        around = {covered[c - 1][2]} if c and covered[c - 1][1] == i else set()
        loop = None
        for period in by_first.get(tokens.at(i), ()):
            limit, trips = (end - i) // period, 1
            while trips < limit and all(tokens.at(i + trips * period + q) == tokens.at(i + q)
                                        for q in range(period)):
                trips += 1
            if not TINY_TRIPS <= trips < MIN_TRIPS:
                continue  # (a longer run that did not roll is not rolled piecewise)
            loop = _plan(seq, index, last_use, i, period, trips, 0, TINY_TRIPS)
            if loop is not None:
                loop.kind = _kind(loop, tokens)
                beside = around | ({covered[c][2]} if c < len(covered) and loop.start
                                   + loop.trips * loop.period == end else set())
                if loop.kind in kinds[(period, tokens.at(i))] and loop.kind not in beside:
                    break
                loop = None
        if loop is None:
            i += 1
        else:
            loop.tiny = True
            found.append(loop)
            i = loop.start + loop.trips * loop.period
    return found


def _kind(loop: Loop, tokens: Tokens) -> tuple:
    """What a short loop's recurrences share: one trip's instructions, by their tokens, in
    an order that does not depend on where in its trip the loop was found to start."""
    return tuple(sorted(tokens.at(loop.start + c) for c in range(loop.period)))


def _varying_text(loop: Loop, seq) -> str:
    parts = []
    for c, starts in sorted(loop.slice_starts.items()):
        if not varies(starts):
            continue
        steps = [step for _, step in starts]
        parts.append(f"%{seq[loop.start + c].name}'s start (steps {steps})")
    for c, row in enumerate(loop.classes):
        for k, cls in enumerate(row):
            if cls[0] == "progression":
                parts.append(f"operand {k} of %{seq[loop.start + c].name} "
                             f"({cls[1]}, {cls[1] + cls[2]}, ...)")
    return "; ".join(parts[:4]) + (f"; and {len(parts) - 4} more" if len(parts) > 4 else "") \
        if parts else "nothing (the same offsets every trip)"


def _nested_text(body: Computation) -> str:
    """What a rolled loop's decision adds when its trips hold loops rolled before."""
    inner = sum(1 for inst in body.instructions if inst.opcode == "while")
    return (f"; each trip runs {inner} loop(s) rolled in the round before (a nest rolls from "
            "the inside out)") if inner else ""


def _planned(entry: Computation):
    """The loops of ``entry`` that roll: (its trips' instructions, their positions, the
    loops, what the program would leave to compile: its instructions outside the loops and
    one trip of each kind of body)."""
    seq = [inst for inst in entry.instructions
           if inst.opcode != "parameter" and inst.opcode != "constant"]
    # (keyed by the instructions themselves: they hash by identity, with no id() call)
    index = {inst: k for k, inst in enumerate(seq)}
    last_use = [-1] * len(seq)
    for k, inst in enumerate(seq):
        for o in inst.operands:
            j = index.get(o)
            if j is not None:
                last_use[j] = k
    root = index.get(entry.root)
    if root is not None:
        last_use[root] = len(seq)
    sketch_codes: dict[tuple, int] = {}
    codes = [sketch_codes.setdefault(sketch(inst), len(sketch_codes)) for inst in seq]
    tokens = Tokens(seq)
    loops = _find_loops(seq, index, last_use, codes, tokens)
    # a short loop rolls where loops with the same body recur, MIN_INSTRUCTIONS in all
    kinds: Counter = Counter()
    for loop in loops:
        loop.kind = _kind(loop, tokens)
        if loop.short:
            kinds[loop.kind] += loop.trips * loop.period
    loops = [loop for loop in loops if not loop.short or kinds[loop.kind] >= MIN_INSTRUCTIONS
             or loop.trips * loop.period >= LONE_SHORT_LOOP]
    # the loop is emitted where its first trip began: what it reads from outside must be
    # defined by then (a parameter made while tracing, after a graph break, may come later)
    position = {inst: k for k, inst in enumerate(entry.instructions)}
    loops = [loop for loop in loops
             if all(position[v] < position[seq[loop.start]] for v in loop.invariants)]
    kinds_left = {loop.kind for loop in loops}
    left = len(seq) - sum(loop.trips * loop.period for loop in loops) + sum(
        len(kind) + BODY_COST for kind in kinds_left)
    tiny = [loop for loop in _find_tiny_loops(seq, index, last_use, tokens, loops)
            if all(position[v] < position[seq[loop.start]] for v in loop.invariants)]
    if tiny:
        loops = sorted(loops + tiny, key=lambda loop: loop.start)
    return seq, index, loops, left


def roll_loops(module: Module):
    """(the module with alike unrolled trips rolled into while loops, counts, decisions). A
    nest rolls from the inside out, a level a round: once its inner loops are while loops,
    the trips of the loop around them are alike (``for j: ...; for k in range(i + 1, j):``,
    each inner loop's bounds and trip count loop state), up to ``MAX_NESTING`` levels."""
    counts: Counter = Counter()
    decisions: list[FusionDecision] = []
    for _ in range(MAX_NESTING):
        module, rolled, decided = _roll_once(module)
        if not decided:
            break
        counts.update(rolled)
        decisions += decided
    return module, counts, decisions


def _roll_once(module: Module):
    """One round of ``roll_loops``: the loops of the entry as it is."""
    given = module
    entry = module.entry
    if sum(1 for inst in entry.instructions
           if inst.opcode != "parameter" and inst.opcode != "constant") < MIN_INSTRUCTIONS:
        return module, Counter(), []
    seq, index, loops, left = _planned(entry)
    # a padded dot's sum or a padded write -> what it was (PaddedDot, PaddedWrite)
    originals: dict[int, PaddedDot | PaddedWrite] = {}
    if len(seq) >= SHORT_LOOPS_FROM:  # (a triangular nest's dots and writes, one length:
        # contraction_padding, window_padding)
        padded = pad_contractions(module, MIN_TRIPS)
        windows = pad_window_writes(padded[0] if padded is not None else module, MIN_TRIPS,
                                    padded[1] if padded is not None else None)
        if windows is not None:
            padded = windows
        if padded is not None:
            planned = _planned(padded[0].entry)
            # (kept where it leaves less to compile: padded, the loops of a nest share their
            # bodies, or trips alike but for their lengths roll; where they rolled anyway and
            # stay one body a loop, padding only lengthens each body)
            if planned[3] < left:
                module, originals = padded
                entry = module.entry
                seq, index, loops, left = planned
    if not loops:
        return given, Counter(), []

    computation_names = NameUniquer.from_names(c.name for c in module.computations)
    bodies = {loop.start: build_body(loop, seq, computation_names) for loop in loops}
    if any(loop.tiny for loop in loops):  # (kept where its body is one rolled already)
        rolled = {exact_key(inst.attrs["body"]) for inst in entry.instructions
                  if inst.opcode == "while"}
        rolled.update(exact_key(bodies[loop.start][0]) for loop in loops if not loop.tiny)
        loops = [loop for loop in loops
                 if not loop.tiny or exact_key(bodies[loop.start][0]) in rolled]
        if not loops:
            return given, Counter(), []
    builder = ComputationBuilder(entry.name, NameUniquer.from_names(
        inst.name for inst in entry.instructions))
    starting = {loop.start: loop for loop in loops}
    inside = {}
    for loop in loops:
        for k in range(loop.start, loop.start + loop.trips * loop.period):
            inside[k] = loop
    mapping: dict[int, Instruction] = {}
    extra: list[Computation] = []
    counts: Counter = Counter()
    decisions: list[FusionDecision] = []
    for inst in entry.instructions:
        k = index.get(inst)
        if k is None or k not in inside:
            original = originals.get(id(inst))
            if original is not None:  # padded, yet in no loop: the dot or write it was
                rebuilt = original.rebuild(builder, mapping)
                if rebuilt is not None:
                    mapping[id(inst)] = rebuilt
                    continue
            mapping[id(inst)] = builder.adopt(
                with_operands(inst, [mapping[id(o)] for o in inst.operands]))
            continue
        loop = starting.get(k)
        if loop is None:
            continue  # a trip's instruction: the loop computes it
        body, condition, shapes, lifted = bodies[k]
        extra += [condition, body]
        i, period = loop.start, loop.period
        first_values = [mapping[id(seq[i + q - period])] if q in loop.carried
                        else zeros_of(builder, seq[i + q].shape) for q in loop.state]
        init = builder.add("tuple", [builder.constant(np.array(0, np.int64))] + first_values
                           + [mapping[id(v)] for v in loop.invariants]
                           + [builder.constant(value) for value in lifted])
        trip_count = json.dumps({"known_trip_count": {"n": str(loop.trips)}},
                                separators=(",", ":"))
        first = seq[i]
        md = first.metadata
        rolled = builder.add(
            "while", [init],
            {"condition": condition, "body": body, "_raw": (("backend_config", trip_count),)},
            metadata=Metadata(f"rolled loop of {loop.trips} trips",
                              md.source_file if md else "", md.source_line if md else 0))
        last = i + (loop.trips - 1) * period
        for n, q in enumerate(loop.state):
            mapping[id(seq[last + q])] = builder.add(
                "get-tuple-element", [rolled], {"index": 1 + n}, shape=shapes[1 + n])
        counts["loops rolled"] += 1
        counts["trips rolled"] += loop.trips
        if loop.tiny:
            counts["short loops rolled as a longer one's body"] += 1
        padded = [seq[i + c] for c in range(period)
                  if isinstance(originals.get(id(seq[i + c])), PaddedDot)]
        writes = [seq[i + c] for c in range(period)
                  if isinstance(originals.get(id(seq[i + c])), PaddedWrite)]
        if padded:
            counts["dots padded to whole rows"] += len(padded) * loop.trips
        if writes:
            counts["writes padded to whole rows"] += len(writes) * loop.trips
        location = md.location if md is not None else ""
        decisions.append(FusionDecision(
            producer=first.name, consumer=rolled.name, fused=False, reason="ROLLED_LOOP",
            message=(f"{REASONS['ROLLED_LOOP']}: {loop.trips} trips of {period} instructions "
                     f"alike up to their offsets (%{first.name} ... "
                     f"%{seq[i + period - 1].name} once, as %{body.name}); varying: "
                     f"{_varying_text(loop, seq)}"
                     + (padded_text(len(padded), padded[0].operands[0].shape.dims[0])
                        if padded else "")
                     + (padded_writes_text(len(writes), writes[0]) if writes else "")
                     + _nested_text(body)
                     + ("; fewer trips than a loop needs, but the body is exactly one rolled "
                        "for a longer loop" if loop.tiny else "")),
            producer_location=location, consumer_location=location, fusion=rolled.name))
    new_entry = builder.build(mapping[id(entry.root)])
    return replace_entry(module, new_entry, tuple(extra)), counts, decisions
