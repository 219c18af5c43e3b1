"""Runtime: compile history and recompilation policy (executor and caches join later)."""
