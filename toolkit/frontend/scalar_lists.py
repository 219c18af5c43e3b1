"""Lists of Python numbers passed to a jitted function. As in JAX, a list is a pytree of
separate scalars, not an array: ``x * 2`` repeats it, ``np.exp(x)`` cannot convert it. A
warning says so when such a list arrives, and an error the list then causes says so again,
naming the argument, instead of the traced-value advice (``if``/``while``) that does not apply."""
from __future__ import annotations

from .errors import ToolkitError, TracerConversionError

_NUMBERS = (int, float, bool)


class ScalarListWarning(UserWarning):
    """A list of Python numbers was passed where an array was probably meant."""


class ScalarListError(ToolkitError, TypeError):
    """A jitted function failed on a list of Python numbers it was given in place of an array."""


def python_number_list(value) -> tuple[int, bool] | None:
    """(how many numbers, whether nested) if ``value`` is a non-empty list of Python numbers or
    of such lists (``[[1.0, 2.0], [3.0, 4.0]]``), else None. Iterative: depth costs no stack."""
    if type(value) is not list or not value:
        return None
    count, nested, pending = 0, False, [value]
    while pending:
        items = pending.pop()
        if not items:
            return None
        for item in items:
            if type(item) in _NUMBERS:
                count += 1
            elif type(item) is list:
                nested = True
                pending.append(item)
            else:
                return None
    return count, nested


def _describe(name: str, count: int, nested: bool) -> str:
    return f"argument '{name}' is a {'nested list' if nested else 'list'} of {count} Python numbers"


def scalar_list_warnings(fn_name: str, dynamic, call_site: str) -> list[str]:
    """The ScalarListWarning messages for a call's (name, value) arguments."""
    messages = []
    for name, value in dynamic:
        found = python_number_list(value)
        if found is None:
            continue
        where = f" (called at {call_site})" if call_site else ""
        messages.append(
            f"jit({fn_name}): {_describe(name, *found)}{where}. jit treats a list as a pytree of "
            f"{found[0]} separate scalar arguments, as JAX does, not as one array: operators act "
            f"on the list. Pass np.asarray({name}) for an array, or a tuple to keep separate "
            "scalars without this warning.")
    return messages


def _caused_by(error: TypeError, name: str) -> bool:
    if isinstance(error, TracerConversionError):  # converting one of the list's scalars
        return getattr(error, "origin", "").startswith(f"argument '{name}[")
    text = str(error)  # Python's own: "can't multiply sequence ...", "... 'list' and ..."
    return not isinstance(error, ToolkitError) and ("list" in text or "sequence" in text)


def scalar_list_error(error: TypeError, fn_name: str, dynamic) -> ScalarListError | None:
    """The error to raise instead of ``error`` (raised while tracing) when a list of Python
    numbers among the (name, value) arguments caused it; None when none did."""
    for name, value in dynamic:
        found = python_number_list(value)
        if found is None or not _caused_by(error, name):
            continue
        if isinstance(error, TracerConversionError):
            where = getattr(error, "location", "")
            what = "an array could not be made of its traced scalars" + (
                f" at {where}" if where else "")
        else:
            what = f"Python failed on the list: {error}"
        return ScalarListError(
            f"jit({fn_name}): {_describe(name, *found)}, which jit passes to the function as "
            f"separate traced scalars (a pytree, as JAX does), not as one array; {what}. "
            f"Pass np.asarray({name}) for an array.")
    return None
