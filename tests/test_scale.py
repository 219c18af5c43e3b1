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


def test_a_long_compile_shows_its_phases_and_size(monkeypatch, capsys):
    from toolkit.profiler import progress

    monkeypatch.setattr(progress, "DELAY_SECONDS", 0.0)
    seen = []
    original = progress.CompileProgress._show

    def show_and_remember(self):
        original(self)
        seen.append(self.current)

    monkeypatch.setattr(progress.CompileProgress, "_show", show_and_remember)
    monkeypatch.setattr(progress.CompileProgress, "line", lambda self: f"compiling {self.name}: "
                        f"{self.instructions:,} instructions, {self.current}")
    import time

    from toolkit.backends.llvm import llvm_worker
    real_optimize = llvm_worker.optimize

    def slow_optimize(module, tm):  # long enough for the watcher to look twice
        time.sleep(0.7)
        real_optimize(module, tm)

    monkeypatch.setenv("TOOLKIT_LLVM_WORKER", "0")  # (the worker process would not see the patch)
    monkeypatch.setattr(llvm_worker, "optimize", slow_optimize)
    tk.jit(lambda v: np.tanh(v) + 1, backend="cpu").lower(np.ones(8)).compile()
    err = capsys.readouterr().err
    assert "compiling jit(lambda)" in err and "instructions" in err
    assert "LLVM O3 optimisation and machine code" in seen and err.rstrip().endswith("done")


def test_short_compiles_print_nothing(capsys):
    tk.jit(lambda v: v + 1, backend="cpu").lower(np.ones(8)).compile()
    assert "compiling" not in capsys.readouterr().err
