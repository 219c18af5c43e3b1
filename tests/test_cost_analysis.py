"""Cost analysis against hand counts (XLA's rules; tests/test_hlo_text.py checks XLA itself)."""
import pytest
import numpy as np

import toolkit as tk
from toolkit.passes.cost_analysis import cost_analysis, instruction_cost


def test_elementwise_chain_hand_count():
    n = 1000
    f = tk.jit(lambda x, a, b: np.tanh(x * a + b) * 0.5 + x)
    cost = f.lower(np.ones(n, np.float32), np.float32(2), np.float32(1)).cost_analysis()
    # x*a, +b, *0.5, +x: 4 flops per element; tanh: 1 transcendental
    assert cost["flops"] == 4 * n
    assert cost["transcendentals"] == n


def test_dot_counts_two_flops_per_multiply_add():
    m, k, n = 8, 16, 4
    f = tk.jit(lambda a, b: a @ b)
    cost = f.lower(np.ones((m, k), np.float32), np.ones((k, n), np.float32)).cost_analysis()
    assert cost["flops"] == 2 * m * n * k
    assert cost["bytes accessed"] == 4 * (m * k + k * n + m * n)
    assert cost["bytes accessed0{}"] == 4 * m * k and cost["bytes accessed1{}"] == 4 * k * n
    assert cost["bytes accessedout{}"] == 4 * m * n


def test_reduce_counts_in_minus_out_times_reducer():
    f = tk.jit(lambda x: x.sum(axis=1))
    cost = f.lower(np.ones((10, 7), np.float64)).cost_analysis()
    assert cost["flops"] == 70 - 10
    assert cost["bytes accessed"] == 8 * 70 + 8 + 8 * 10  # input, init, output


def test_optimal_seconds_is_the_roofline_bound():
    f = tk.jit(lambda a, b: a @ b)
    module = f.lower(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32)).hlo
    cost = cost_analysis(module, peak_flops=1e9, peak_bandwidth=1e9)
    assert cost["optimal_seconds"] == max(2 * 64 ** 3 / 1e9, 3 * 64 * 64 * 4 / 1e9)
    assert cost_analysis(module)["optimal_seconds"] == 0.0


def test_zero_cost_instructions():
    module = tk.hlo.parse("""HloModule m
    ENTRY e {
      p = f32[4,1,8]{2,1,0} parameter(0)
      t = f32[1,4,8]{2,1,0} transpose(p), dimensions={1,0,2}
      c = f32[] constant(1)
      ROOT tup = (f32[1,4,8], f32[]) tuple(t, c)
    }""")
    costs = {i.name: instruction_cost(i) for i in module.entry.instructions}
    assert costs["p"]["bytes accessed"] == 0 and costs["c"]["bytes accessed"] == 0
    assert costs["t"]["bytes accessed"] == 0  # moves only a size-1 dimension: a bitcast
    assert costs["tup"]["bytes accessed"] == 16  # the tuple's index table


def test_a_loop_counts_one_trip_as_xla_and_every_trip_when_known():
    body = lambda i, v: np.tanh(v) * 2  # noqa: E731
    known = (
        tk.jit(lambda x: tk.lax.fori_loop(0, 10, body, x))
        .lower(np.ones(100))
        .compile()
        .cost_analysis()
    )
    assert known["transcendentals"] == 100  # XLA's number: one trip
    assert known["transcendentals (known trip counts)"] == 1000
    assert known["flops (known trip counts)"] == pytest.approx(10 * known["flops"])
    traced = (
        tk.jit(lambda x, n: tk.lax.fori_loop(0, n, body, x))
        .lower(np.ones(100), 3)
        .compile()
        .cost_analysis()
    )
    assert "flops (known trip counts)" not in traced  # a traced trip count is not known
