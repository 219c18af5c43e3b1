"""How sizes are written in reports."""
from __future__ import annotations


def binary_bytes(n: float) -> str:
    """``512 B``, ``8.0 KiB``, ``1.5 MiB``, ``2.0 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
