"""Constant literals in HLO text: ``constant(0)``, ``constant(-inf)``, ``constant({ {1, 2}, {3, 4}
})``."""
from __future__ import annotations

import math

import numpy as np


def scalar_to_text(value) -> str:
    if isinstance(value, (complex, np.complexfloating)):  # XLA's (real, imag)
        part = np.float32 if isinstance(value, np.complex64) else np.float64
        return f"({scalar_to_text(part(value.real))}, {scalar_to_text(part(value.imag))})"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (np.floating, float)):
        f = float(value)
        if math.isnan(f):
            return "nan" if not math.copysign(1.0, f) < 0 else "-nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        text = str(value if isinstance(value, np.floating) else np.float64(value))
        if text.endswith(".0"):
            text = text[:-2]
        return text.replace("e+", "e+").replace(".0e", "e")
    return str(int(value))


def literal_to_text(array: np.ndarray) -> str:
    if array.ndim == 0:
        return scalar_to_text(array[()])

    def nest(a: np.ndarray) -> str:
        if a.ndim == 1:
            return "{" + ", ".join(scalar_to_text(v) for v in a) + "}"
        return "{ " + ", ".join(nest(sub) for sub in a) + " }"

    return nest(array)
