"""``tk.lax``: structured control flow with ``jax.lax``'s names and semantics. Loops and
branches on traced values compile to HLO ``while`` and ``conditional`` instead of unrolling."""
from .frontend.control_flow import cond, fori_loop, scan, switch, while_loop

__all__ = ["cond", "fori_loop", "scan", "switch", "while_loop"]
