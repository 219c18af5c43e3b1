"""A jitted function called while another function is being traced (a nested jit, or a
function calling itself): its Python body runs inside the enclosing trace, as JAX inlines
nested jits. Running a compiled program on tracers is impossible, and compiling here would
wait on the lock the enclosing compile holds."""
from __future__ import annotations

import threading
from typing import Callable

from ..frontend.errors import UserTypeError

MAX_INLINE_DEPTH = 64


class Inliner:
    def __init__(self, fn: Callable, fn_name: str):
        self.fn = fn
        self.fn_name = fn_name
        self._depth = threading.local()

    def __call__(self, args: tuple, kwargs: dict):
        depth = getattr(self._depth, "value", 0)
        if depth >= MAX_INLINE_DEPTH:
            raise UserTypeError(
                f"jit({self.fn_name}) calls itself more than {MAX_INLINE_DEPTH} levels deep "
                "while being traced. Recursion is unrolled at trace time, so it must end on "
                "static facts (shapes, static arguments); for loops over data use a Python loop "
                "with a static bound.")
        self._depth.value = depth + 1
        try:
            return self.fn(*args, **kwargs)
        finally:
            self._depth.value = depth
