"""toolkit's HLO text accepted by XLA's own parser, compiled by XLA and run to the same results.

Needs jax/jaxlib (``pip install ".[bench]"``); uses jaxlib's HLO-text entry points, which are
private, so the test skips (with the reason) when they are missing."""
import numpy as np
import pytest

import toolkit as tk

import programs
from helpers import assert_outputs_match

jax = pytest.importorskip(
    "jax", reason="JAX not installed: pip install '.[bench]' to check HLO against XLA"
)
pytestmark = pytest.mark.jax

try:
    import jax.extend as jex
    from jax._src.lib import hlo as xla_hlo, xla_client
except ImportError as e:  # pragma: no cover - depends on the jaxlib version
    pytest.skip(f"jaxlib has no HLO text entry points here: {e}", allow_module_level=True)

jax.config.update("jax_enable_x64", True)


def xla_run(text: str, args):
    backend = jex.backend.get_backend("cpu")
    module = xla_hlo.hlo_module_from_text(text)  # XLA's parser
    mlir = jex.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    exe = backend.compile_and_load(mlir, jax.devices("cpu")[:1], xla_client.CompileOptions())
    outs = exe.execute_sharded(
        [jax.device_put(a) for a in args]
    ).disassemble_into_single_device_arrays()
    return [np.asarray(o[0]) for o in outs]


@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_xla_parses_compiles_and_agrees(name):
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    text = tk.jit(fn).lower(*args).as_text()
    ours = tk.jit(fn)(*args)
    ours = list(ours) if isinstance(ours, tuple) else [ours]
    theirs = xla_run(text, args)
    # runtime checks (traced indices in range)
    assert not any(bool(flag) for flag in theirs[len(ours):])
    assert_outputs_match(ours, theirs[:len(ours)])


@pytest.mark.parametrize("name", sorted(programs.make_cases(np.random.default_rng(0))))
def test_xla_parses_optimized_hlo(name):
    """Optimised text (fusions, multi-output tuples) is accepted by XLA's parser. (XLA:CPU
    will not compile fusions it did not make itself: they lack its backend configs.)"""
    fn, args = programs.make_cases(np.random.default_rng(0))[name]
    text = tk.jit(fn).lower(*args).compile().as_text()
    module = xla_hlo.hlo_module_from_text(text)
    assert "fusion(" in module.to_string() or "dot(" in module.to_string()
