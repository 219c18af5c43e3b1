"""``einsum`` of one or two operands as reductions, one ``dot`` and a transpose."""
from __future__ import annotations

import numpy as np

from . import lax
from .arguments import promote_pair
from .errors import ShapeMismatchError, UnsupportedNumpyError, UserValueError
from .matrices import diagonal
from .promotion import result_dtype
from .tracer import Tracer


def _parse(subscripts: str, n: int) -> tuple[list[str], str]:
    spec = subscripts.replace(" ", "")
    if "." in spec:
        raise UnsupportedNumpyError("einsum with '...' (ellipsis) is not supported yet")
    if "->" in spec:
        inputs, output = spec.split("->")
    else:
        inputs = spec
        letters = inputs.replace(",", "")
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    terms = inputs.split(",")
    if len(terms) != n:
        raise UserValueError(
            f"einsum '{subscripts}' names {len(terms)} operands but {n} were given"
        )
    for term in terms + [output]:
        if not term.isalpha() and term:
            raise UserValueError(f"einsum: invalid subscript '{term}' in '{subscripts}'")
    for c in output:
        if output.count(c) > 1:
            raise UserValueError(
                f"einsum(): output subscript '{c}' appears more than once in '{subscripts}'"
            )
    return terms, output


def _diagonals(x: Tracer, term: str, operand: int) -> tuple[Tracer, str]:
    """``x`` with each index its term repeats (``ii``) taken along the diagonal, as NumPy's
    einsum does (a trace, then, once the index is summed out)."""

    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        p = term.index(c)
        q = term.index(c, p + 1)
        if x.shape[p] != x.shape[q]:
            raise ShapeMismatchError(
                f"einsum(): dimensions in operand {operand} for collapsing index '{c}' "
                f"don't match ({x.shape[p]} != {x.shape[q]})"
            )
        x = diagonal(x, 0, p, q)  # the diagonal becomes the last axis
        term = "".join(t for i, t in enumerate(term) if i not in (p, q)) + c
    return x, term


def _sum_out(x: Tracer, term: str, keep: set[str]) -> tuple[Tracer, str]:
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    kept = "".join(c for c in term if c in keep)
    if x.dtype == np.float16:  # NumPy's half einsum sums in float (and so does np.sum)
        return lax.convert(lax.reduce(lax.convert(x, np.float32), "add", axes), np.float16), kept
    # (NumPy's bool einsum adds with or)
    return lax.reduce(x, "or" if x.dtype == np.bool_ else "add", axes), kept


def _drop_broadcast(x: Tracer, term: str, sizes: dict[str, int]) -> tuple[Tracer, str]:
    kept = [i for i, c in enumerate(term) if not (x.shape[i] == 1 and sizes[c] > 1)]
    if len(kept) == len(term):
        return x, term
    return lax.reshape(x, [x.shape[i] for i in kept]), "".join(term[i] for i in kept)


builtins_max = max


def einsum(subscripts: str, *operands) -> Tracer:

    if len(operands) not in (1, 2):
        raise UnsupportedNumpyError("einsum supports one or two operands")
    terms, output = _parse(subscripts, len(operands))
    if len(operands) == 1:
        trace = lax.trace_of(operands)
        x = lax.lift(trace, operands[0], result_dtype(operands))
        if len(terms[0]) != x.ndim:
            raise ShapeMismatchError(
                f"einsum: '{terms[0]}' has {len(terms[0])} indices but the operand is "
                f"{x.describe()}"
            )
        x, term = _diagonals(x, terms[0], 0)
        x, term = _sum_out(x, term, set(output))
        return lax.transpose(x, [term.index(c) for c in output])
    a, b = promote_pair(operands[0], operands[1], "einsum")
    ta, tb = terms
    for t, x in ((ta, a), (tb, b)):
        if len(t) != x.ndim:
            raise ShapeMismatchError(
                f"einsum: '{t}' has {len(t)} indices but the operand is {x.describe()}"
            )
    a, ta = _diagonals(a, ta, 0)
    b, tb = _diagonals(b, tb, 1)
    sizes: dict[str, int] = {}
    for t, x in ((ta, a), (tb, b)):
        for c, d in zip(t, x.shape):
            known = sizes.setdefault(c, d)
            if known != d and 1 not in (known, d):
                raise ShapeMismatchError(
                    f"einsum: index '{c}' has sizes {known} and {d} in '{subscripts}'"
                )
            sizes[c] = builtins_max(known, d)
    # NumPy broadcasts an index of size 1 against the other operand's size: drop it from the
    # operand that has it with size 1, which then repeats along it, as broadcasting does.
    a, ta = _drop_broadcast(a, ta, sizes)
    b, tb = _drop_broadcast(b, tb, sizes)
    out_set = set(output)
    a, ta = _sum_out(a, ta, out_set | set(tb))
    b, tb = _sum_out(b, tb, out_set | set(ta))
    shared = [c for c in ta if c in tb]
    batch = [c for c in shared if c in out_set]
    contract = [c for c in shared if c not in out_set]
    result = lax.dot_general(
        a,
        b,
        ([ta.index(c) for c in contract], [tb.index(c) for c in contract]),
        ([ta.index(c) for c in batch], [tb.index(c) for c in batch]),
    )
    result_term = (
        "".join(batch)
        + "".join(c for c in ta if c not in shared)
        + "".join(c for c in tb if c not in shared)
    )
    return (
        lax.transpose(result, [result_term.index(c) for c in output])
        if result.dtype != np.bool_
        else result
    )
