"""Programs of real size: unrolled loops make tens of thousands of instructions. Every pass,
emitter and analysis is iterative and linear, so they compile, run and match NumPy."""
import numpy as np

import toolkit as tk


def _long_program(x, y):
    for step in range(4800):
        x = x * 1.0001 + 0.5
        if step % 60 == 0:
            x = x - x.mean()
        if step % 70 == 0:
            y = np.concatenate([y[1:], y[:1]]) * 0.5 + x[:4].sum()
    return x, y


def test_a_20000_instruction_program_compiles_runs_and_matches_numpy():
    x, y = np.linspace(0, 1, 256), np.arange(8.0)
    jitted = tk.jit(_long_program, backend="cpu")
    lowered = jitted.lower(x, y)
    assert len(lowered.hlo.entry.instructions) >= 20_000
    compiled = lowered.compile()
    got = compiled(x, y)
    want = _long_program(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9)
    assert compiled.cost_analysis()["flops"] > 0
    assert compiled.memory_analysis() is not None
    again = tk.hlo.run(tk.hlo.parse(lowered.as_text()), x, y)  # print, parse and interpret
    np.testing.assert_allclose(again[0], want[0], rtol=1e-9)
