"""Why did this call recompile? Signature records, diffs against the closest earlier
signatures, and fix suggestions that fit the values actually seen.

Cause codes are stable (tests and tools may rely on them):
SHAPE, RANK, DTYPE, WEAK_TYPE, TREE_STRUCTURE, ARGUMENTS, STATIC_VALUE, SPECIALIZED, BACKEND,
COMPILE_OPTIONS, NEW_FUNCTION_OBJECT, NEW_JIT_WRAPPER, CLOSURE_VALUE, GLOBAL_VALUE, CAPTURED_VALUE
(frontend.captured), EVICTED."""
from __future__ import annotations

import types
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ..ir.source_names import display_location
from ..profiler.events import Cause
from .signature import ArgSpec

_REPR_LIMIT = 60


def short_repr(value) -> str:
    if isinstance(value, np.ndarray):
        text = (
            f"array({value.dtype}{list(value.shape)})" if value.size > 8 else repr(value.tolist())
        )
    elif callable(value) and getattr(value, "__code__", None) is not None:
        # a function: where it is defined, so a closure re-created per call is recognised
        code = value.__code__
        text = f"<function {getattr(value, '__qualname__', code.co_name)} defined at " \
               f"{display_location(code.co_filename, code.co_firstlineno)}, object {id(value):#x}>"
        return text
    else:
        text = repr(value)
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 1] + "…"


def _fingerprint(value) -> str | None:
    """A comparable description of a captured value, or None when it is not data."""
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None))):
        return short_repr(value)
    if isinstance(value, np.generic):
        return short_repr(value.item())
    if isinstance(value, np.ndarray):
        digest = hash(value.tobytes()) if value.size <= 4096 else hash(value.tobytes()[:4096])
        return f"{short_repr(value)}#{digest & 0xffff:04x}"
    if isinstance(value, tuple) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return short_repr(value)
    return None


def captured_values(fn) -> tuple[tuple[str, str, str], ...]:
    """(kind, name, fingerprint) of closure cells and globals ``fn`` reads that hold data."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ()
    out = []
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            fp = _fingerprint(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
        if fp is not None:
            out.append(("closure", name, fp))
    globals_ = getattr(fn, "__globals__", {})
    for name in code.co_names:
        if name in globals_ and not isinstance(globals_[name], (types.ModuleType, type)) \
                and not callable(globals_[name]):
            fp = _fingerprint(globals_[name])
            if fp is not None:
                out.append(("global", name, fp))
    return tuple(out)


def function_location(fn) -> str:
    """Where ``fn`` is defined (through wrappers: ``__wrapped__``, as functools.wraps sets it)."""
    seen = 0
    while getattr(fn, "__wrapped__", None) is not None and seen < 16:
        fn, seen = fn.__wrapped__, seen + 1
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    return display_location(code.co_filename, code.co_firstlineno)


@dataclass(frozen=True)
class SignatureRecord:
    """Everything a compiled program was keyed by, in explainable form."""

    function_id: int
    jit_id: int  # the tk.jit wrapper: a new wrapper of the same function has an empty cache
    location: str
    arg_names: tuple[str, ...]
    trees: tuple[str, ...]  # the pytree structure of each named argument
    leaves: tuple[ArgSpec, ...]
    statics: tuple[tuple[str, str, int], ...]  # (name, repr, hash)
    backend: str
    options: tuple[tuple[str, str], ...] = ()
    captured: tuple[tuple[str, str, str], ...] = ()
    hlo_fingerprint: str = field(default="", compare=False)
    # (name, file:line) of the statics that are Python int arguments specialized after a graph
    # break asked for them as numbers (not the user's static_argnums)
    specialized: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def text(self) -> str:
        parts = [f"{s.path}: {s.text}" for s in self.leaves]
        parts += [f"{name}={value}" for name, value, _ in self.statics]
        return ", ".join(parts) or "()"


_WEAK_TEXT = {
    True: "a Python scalar (weakly typed)",
    False: "a NumPy array (strongly typed)",
    None: "a NumPy scalar (strongly typed)",
}


def _leaf_differences(new: ArgSpec, old: ArgSpec):
    if len(new.shape) != len(old.shape):
        yield ("RANK", new.path, old, new)
    else:
        for d, (a, b) in enumerate(zip(new.shape, old.shape)):
            if a != b:
                yield ("SHAPE", f"{new.path}.shape[{d}]", b, a)
    if new.dtype != old.dtype:
        yield ("DTYPE", new.path, old.dtype, new.dtype)
    if new.weak_type != old.weak_type:
        yield ("WEAK_TYPE", new.path, old.weak_type, new.weak_type)


def differences(new: SignatureRecord, old: SignatureRecord):
    """Raw differences ``(code, path, old, new)``: cheap, for ranking many earlier signatures."""
    if new.function_id == old.function_id and new.jit_id != old.jit_id:
        yield ("NEW_JIT_WRAPPER", "", None, None)
    if new.function_id != old.function_id:
        yield ("NEW_FUNCTION_OBJECT", "", None, None)
        old_captured = {(k, n): fp for k, n, fp in old.captured}
        for kind, name, fp in new.captured:
            before = old_captured.get((kind, name))
            if before is not None and before != fp:
                yield ("CLOSURE_VALUE" if kind == "closure" else "GLOBAL_VALUE", name, before, fp)
    if new.backend != old.backend:
        yield ("BACKEND", "", old.backend, new.backend)
    if new.options != old.options:
        old_opts, new_opts = dict(old.options), dict(new.options)
        for key in sorted(set(old_opts) | set(new_opts)):
            if old_opts.get(key) != new_opts.get(key):
                yield ("COMPILE_OPTIONS", key, old_opts.get(key), new_opts.get(key))
    old_static_names = {n for n, _, _ in old.statics}
    # Python ints that were traced in ``old`` and are specialized now: that alone moves them
    # from the traced arguments to the statics
    moved = {n: where for n, where in new.specialized
             if n in old.arg_names and n not in old_static_names}
    if new.arg_names != old.arg_names and \
            new.arg_names != tuple(n for n in old.arg_names if n not in moved):
        yield ("ARGUMENTS", "", old.arg_names, new.arg_names)
    if new.leaves != old.leaves or new.trees != old.trees:
        old_tree = dict(zip(old.arg_names, old.trees))
        old_leaves = _leaves_by_arg(old)
        new_leaves = _leaves_by_arg(new)
        for name, tree in zip(new.arg_names, new.trees):
            if name not in old_tree:
                continue
            if tree != old_tree[name]:
                yield ("TREE_STRUCTURE", name, old_tree[name], tree)
                continue
            for a, b in zip(new_leaves[name], old_leaves[name]):
                yield from _leaf_differences(a, b)
    if new.statics != old.statics:
        old_statics = {n: (r, h) for n, r, h in old.statics}
        new_statics = {n: (r, h) for n, r, h in new.statics}
        for name in sorted(set(old_statics) | set(new_statics), key=str):
            if name in moved:
                yield ("SPECIALIZED", str(name), moved[name], new_statics[name][0])
            elif old_statics.get(name) != new_statics.get(name):
                yield ("STATIC_VALUE", str(name), old_statics.get(name, ("(not passed)", 0))[0],
                       new_statics.get(name, ("(not passed)", 0))[0])


def _cause(code: str, path: str, old, new, location: str) -> Cause:
    if code == "NEW_FUNCTION_OBJECT":
        return Cause(code, "", "earlier function object", "new function object",
                     f"a new function object for the same source ({location}): the cell was re-run "
                     "or the function is re-created on every call (e.g. in a loop), so its "
                     "compilation cache started empty")
    if code == "NEW_JIT_WRAPPER":
        return Cause(code, "", "earlier tk.jit wrapper", "new tk.jit wrapper",
                     "tk.jit was applied to the same function again, making a new jitted function "
                     "with an empty cache (e.g. tk.jit(f)(x) inside a loop or a function body)")
    if code in ("CLOSURE_VALUE", "GLOBAL_VALUE"):
        kind = "closure" if code == "CLOSURE_VALUE" else "global"
        return Cause(
            code,
            path,
            old,
            new,
            f"{kind} variable '{path}' captured at trace time: now {new}, was {old}",
        )
    if code == "BACKEND":
        return Cause(code, "", old, new, f"backend now {new!r}, was {old!r}")
    if code == "COMPILE_OPTIONS":
        return Cause(code, path, str(old), str(new), f"compile option {path}: now {new}, was {old}")
    if code == "ARGUMENTS":
        return Cause(code, "", ", ".join(old), ", ".join(new),
                     f"called with traced arguments ({', '.join(new)}), was ({', '.join(old)})")
    if code == "TREE_STRUCTURE":
        return Cause(code, path, old, new, f"{path}: pytree structure now {new}, was {old}")
    if code == "RANK":
        return Cause(
            code,
            path,
            old.text,
            new.text,
            f"{path}: rank now {len(new.shape)} ({new.text}), was {len(old.shape)} ({old.text})",
        )
    if code == "SHAPE":
        return Cause(code, path, str(old), str(new), f"{path}: now {new}, was {old}")
    if code == "DTYPE":
        return Cause(code, path, str(old), str(new), f"{path}: dtype now {new}, was {old}")
    if code == "WEAK_TYPE":
        return Cause(code, path, _WEAK_TEXT[old], _WEAK_TEXT[new],
                     f"{path}: now {_WEAK_TEXT[new]}, was {_WEAK_TEXT[old]}")
    if code == "SPECIALIZED":
        return Cause(code, path, "traced", new,
                     f"'{path}' is a Python int that Python needed as a number (at "
                     f"{_display(old)}): specialized to its value {new}, as a static argument, "
                     "so the call compiles as one program instead of running in segments")
    if code == "STATIC_VALUE":
        same_code = _function_site(old)
        if same_code is not None and same_code == _function_site(new):
            return Cause(
                code,
                path,
                old,
                new,
                f"static argument '{path}': a new function object re-created from the same code "
                f"({same_code}) — a closure or lambda made on every call (the optax#1171 pattern); "
                "passed as a loop body, branch or step function it makes every call recompile",
            )
        return Cause(code, path, old, new, f"static argument '{path}': now {new}, was {old}")
    raise AssertionError(code)


def _display(location: str) -> str:
    return display_location(*location.rsplit(":", 1)) if ":" in location else location or "?"


def _function_site(text: str) -> str | None:
    """'file:line' of a function's short_repr, else None."""
    if text.startswith("<function ") and " defined at " in text:
        return text.split(" defined at ", 1)[1].split(", object ", 1)[0]
    return None


def diff(new: SignatureRecord, old: SignatureRecord) -> list[Cause]:
    """Every difference between two signatures, each a Cause with a stable code."""
    return [_cause(*d, new.location) for d in differences(new, old)]


def _leaves_by_arg(record: SignatureRecord) -> dict[str, list[ArgSpec]]:
    out: dict[str, list[ArgSpec]] = defaultdict(list)
    for spec in record.leaves:
        out[_top_name(spec.path)].append(spec)
    return out


def _top_name(path: str) -> str:
    for i, ch in enumerate(path):
        if ch in "[.":
            return path[:i]
    return path


def closest(
    new: SignatureRecord, earlier: list[SignatureRecord]
) -> list[tuple[SignatureRecord, list[Cause]]]:
    """The earlier signatures at the smallest diff distance (several when equidistant)."""
    scored = [(old, sum(1 for _ in differences(new, old))) for old in earlier]
    if not scored:
        return []
    best = min(n for _, n in scored)
    # ties: a signature with the same static arguments first (a specialized int's new value is
    # told against its last value, not against the call before it was specialized)
    names = {n for n, _, _ in new.statics}
    tied = sorted((old for old, n in scored if n == best),
                  key=lambda old: {n for n, _, _ in old.statics} != names)
    return [(old, diff(new, old)) for old in tied]


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def suggestions(
    causes: list[Cause], history: list[SignatureRecord], new: SignatureRecord
) -> list[str]:
    """Fixes that fit the data seen so far, with the compiles they would have saved."""
    out: list[str] = []
    seen_codes = set()
    records = history + [new]
    for c in causes:
        if c.code == "SHAPE":
            values = _dimension_values(records, c.path)
            if (
                len(values) == 2
                and str(c.new).isdigit()
                and str(c.old).isdigit()
                and int(c.new) < int(c.old)
                and c.path.endswith(".shape[0]")
            ):
                out.append(
                    f"{c.path} is smaller than before ({c.new} < {c.old}): a last, partial batch? "
                    "Pad it to "
                    f"{c.old} rows (masking the padding out of the loss) or drop it, so every step "
                    "runs one "
                    "compiled program; with many batch sizes, pad them to a few bucket sizes"
                )
            if len(values) >= 3:
                buckets = sorted({_next_pow2(v) for v in values})
                if len(buckets) < len(values):
                    out.append(
                        f"{c.path} took {len(values)} values ({_span(values)}); padding it to "
                        "powers "
                        f"of two ({', '.join(map(str, buckets))}) would compile {len(buckets)} "
                        "times "
                        f"instead of {len(values)} (saves {len(values) - len(buckets)})"
                    )
        elif c.code == "STATIC_VALUE" and _function_site(c.old) is not None and \
                _function_site(c.old) == _function_site(c.new):
            out.append(
                f"define '{c.path}' once, outside the loop or function that calls this one, and "
                "pass that same "
                "object every time (a module-level function, with functools.partial for its "
                "settings): "
                "one compile instead of one per call"
            )
        elif c.code == "STATIC_VALUE" and c.path in dict(new.specialized):
            where = _display(dict(new.specialized)[c.path])
            out.append(
                f"'{c.path}' is specialized (Python needs it as a number at {where}), so each "
                f"value compiles a program of its own; to compile once for every value, keep it "
                "traced: a loop over it as tk.lax.fori_loop(0, n, body, state), a branch on it "
                "as tk.lax.cond")
        elif c.code == "STATIC_VALUE" and "STATIC_VALUE" not in seen_codes:
            values = {r for rec in records for n, r, _ in rec.statics if str(n) == c.path}
            out.append(
                f"static argument '{c.path}' took {len(values)} value(s); if it only enters "
                "arithmetic (not shapes or Python control flow), pass it as a traced argument "
                "instead of a static one and compile once"
            )
        elif c.code == "DTYPE":
            out.append(f"cast {c.path} to one dtype before the call (e.g. .astype(np.{c.old})) so "
                       f"{c.old} and {c.new} calls share one compilation")
        elif c.code == "WEAK_TYPE":
            out.append(f"pass {c.path} consistently: always a Python scalar, or always a NumPy "
                       "scalar/array of one dtype")
        elif c.code == "NEW_JIT_WRAPPER":
            out.append("call tk.jit(f) once, keep the result (g = tk.jit(f)) and call g; every "
                       "tk.jit(f) starts a new cache")
        elif c.code == "NEW_FUNCTION_OBJECT":
            out.append(
                "define the jitted function once (at module level or in a cell of its own) and "
                "reuse it; pass changing values as arguments (functools.partial for static ones)"
            )
        elif c.code in ("CLOSURE_VALUE", "GLOBAL_VALUE"):
            out.append(
                f"pass '{c.path}' as an argument instead of capturing it; captured values are "
                "baked into the compiled program"
            )
        elif c.code == "CAPTURED_VALUE":
            out.append(
                f"pass '{c.path}' as an argument: a number read from outside the arguments is a "
                "constant of the program, and an array a parameter of one shape and dtype, so a "
                "new value (or shape) traces the function again"
            )
        elif c.code == "TREE_STRUCTURE":
            out.append(
                f"keep the structure of {c.path} fixed between calls (same keys, same lengths, "
                "None vs array)"
            )
        seen_codes.add(c.code)
    return list(dict.fromkeys(out))


def _dimension_values(records: list[SignatureRecord], dim_path: str) -> list[int]:
    path, _, rest = dim_path.rpartition(".shape[")
    d = int(rest.rstrip("]"))
    values = set()
    for rec in records:
        for spec in rec.leaves:
            if spec.path == path and d < len(spec.shape):
                values.add(spec.shape[d])
    return sorted(values)


def _span(values: list[int]) -> str:
    if len(values) <= 6:
        return ", ".join(map(str, values))
    return f"{values[0]} … {values[-1]}"


def bucket_plan(values: list[int]) -> list[int]:
    return sorted({_next_pow2(v) for v in values})


