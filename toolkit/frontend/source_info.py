"""The user's source file and line for an operation: the first frame outside toolkit and NumPy
(``ir/user_code``, where every layer finds it)."""
from __future__ import annotations

from ..ir.user_code import SourceLocation, user_location

__all__ = ["SourceLocation", "user_location"]
