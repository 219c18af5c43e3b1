"""``tk.lax``: structured control flow with ``jax.lax``'s names and semantics. Loops and
branches on traced values compile to HLO ``while`` and ``conditional`` instead of unrolling.
Inside a ``tk.shard_map``ped function, the collectives over mesh axes (``psum`` ...)."""
from .frontend.collectives import (all_gather, all_to_all, axis_index, axis_size, pmax, pmean,
                                   pmin, ppermute, psum, psum_scatter)
from .frontend.control_flow import cond, fori_loop, scan, switch, while_loop

__all__ = ["cond", "fori_loop", "scan", "switch", "while_loop", "psum", "pmean", "pmax", "pmin",
           "all_gather", "psum_scatter", "ppermute", "all_to_all", "axis_index", "axis_size"]
