"""The machinery behind ``tk.jit``, one idea per module, in the order a call meets them:
``options`` (what ``jit(...)`` was asked for), ``key`` (what a call is cached under),
``miss`` (what a cache miss does: trace, passes, backend, one history record) and ``inline``
(a jitted function called while another is being traced). ``toolkit.api`` puts them together
behind the dispatch fast path."""
