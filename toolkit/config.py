"""toolkit's environment variables, read and validated in one place.

Every layer may import this module (it imports nothing of toolkit). A value that cannot be
understood never breaks ``import toolkit`` or a compile: it is reported once, as a
``ConfigWarning`` that names the variable, what it holds and what it should hold, and the
default is used instead. Values outside a sensible range are clamped, also with one warning."""
from __future__ import annotations

import os
import re
import threading
import warnings

__all__ = ["ConfigWarning", "env_int", "env_bytes", "env_str"]


class ConfigWarning(UserWarning):
    """An environment variable of toolkit's has a value toolkit cannot use."""


_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def warn_once(name: str, value: str, message: str) -> None:
    with _warned_lock:
        if (name, value) in _warned:
            return
        _warned.add((name, value))
    warnings.warn(f"{name}={value!r}: {message}", ConfigWarning, stacklevel=3)


def env_str(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value is None else value.strip()


def _env_number(
    name: str, default, parse, expected: str, minimum: int, maximum: int, unit: str = ""
):
    """A numeric variable: unset or empty gives ``default``; unreadable warns and gives
    ``default``; out of range warns and is clamped."""
    raw = env_str(name)
    if not raw:
        return default
    try:
        value = parse(raw)
    except ValueError:
        warn_once(name, raw, f"expected {expected}; using the default "
                             f"({'automatic' if default is None else default})")
        return default
    if not minimum <= value <= maximum:
        clamped = min(max(value, minimum), maximum)
        warn_once(name, raw, f"outside {minimum}..{maximum}{unit}; using {clamped}")
        return clamped
    return value


def env_int(name: str, default: int | None, minimum: int, maximum: int) -> int | None:
    """An integer variable; unset or empty gives ``default``."""
    return _env_number(name, default, lambda raw: int(raw, 10),
                       f"a whole number from {minimum} to {maximum}", minimum, maximum)


_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 1000 ** 2, "mb": 1000 ** 2,
          "mib": 1 << 20, "g": 1000 ** 3, "gb": 1000 ** 3, "gib": 1 << 30, "t": 1000 ** 4,
          "tb": 1000 ** 4, "tib": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_bytes(text: str) -> int:
    """``4194304``, ``4MiB``, ``4MB``, ``2 GiB`` -> bytes; ValueError otherwise."""
    match = _SIZE.match(text)
    unit = match and _UNITS.get(match.group(2).lower())
    if not match or unit is None:
        raise ValueError(text)
    return int(float(match.group(1)) * unit)


def env_bytes(name: str, default: int, minimum: int = 0, maximum: int = 1 << 50) -> int:
    """A size in bytes: a plain number or one with a unit (``4MiB``, ``2GB``)."""
    return _env_number(name, default, parse_bytes, "a size in bytes such as 4194304, 4MiB or 2GB",
                       minimum, maximum, " bytes")
