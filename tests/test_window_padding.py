"""Window padding (passes/window_padding.py, run by loop rolling): the elementwise row-window
writes of a triangular nest (``C[i, :i + 1] += ...``), whose lengths differ row by row, are
computed over whole rows and selected into the row's own values outside the window, so that
the nest's loops share their bodies. NumPy's bits on every backend, nothing outside a window
changed (inf, NaN kept), and only float writes whose values nothing else reads are padded."""
import numpy as np
import pytest

import toolkit as tk
import toolkit.passes.loop_rolling as loop_rolling
from toolkit.ir.structural import exact_key
from toolkit.passes import window_padding

from test_loop_rolling import _compiled, _rolled, _whiles  # (the same questions of a compile)

BACKENDS = ["cpu", "interpreter", "gpu-simulated"]
PADDED = "write(s) of varying length are computed over whole rows"


@pytest.fixture(autouse=True)
def _long_program_rules(monkeypatch):
    """The suite's programs are small: loop rolling's rules for long programs apply to them."""
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    monkeypatch.setattr(loop_rolling, "SHORT_LOOPS_FROM", 0)
    monkeypatch.setattr(loop_rolling, "MIN_INSTRUCTIONS", 256)


def _syrk(alpha, beta, C, A):  # PolyBench's syrk, as its NumPy port writes it
    for i in range(A.shape[0]):
        C[i, :i + 1] *= beta
        for k in range(A.shape[1]):
            C[i, :i + 1] += alpha * A[i, k] * A[:i + 1, k]
    return C


def _syrk_args(n=20, m=24, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, n)).astype(dtype), rng.random((n, m)).astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rank_k_updates_rows_share_one_body_with_numpys_bits(backend):
    C, A = _syrk_args()
    compiled = _compiled(_syrk, 1.5, 1.2, C.copy(), A, backend=backend)
    rolled = _rolled(compiled)
    padded = [d for d in rolled if PADDED in d.message]
    assert len(padded) >= 15, [d.message for d in rolled]
    assert "whole rows of 20" in padded[0].message
    bodies = {exact_key(loop.attrs["body"]) for loop in _whiles(compiled)}
    assert len(bodies) <= 3, len(bodies)  # (unpadded: one a row)
    got = np.asarray(tk.device_get(compiled(1.5, 1.2, C.copy(), A)))
    np.testing.assert_array_equal(got, _syrk(1.5, 1.2, C.copy(), A))  # the same operations


def test_nothing_outside_a_window_changes():
    """Above the diagonal, C holds infinities and NaN that no window reads or writes: they
    come back as they were, bit for bit (a select keeps them, no arithmetic touches them)."""
    C, A = _syrk_args(seed=1)
    C[np.triu_indices(20, 1)] = np.inf
    C[2, 9] = C[5, 17] = np.nan
    C[3, 4] = -0.0
    compiled = _compiled(_syrk, 1.5, 1.2, C.copy(), A)
    assert any(PADDED in d.message for d in _rolled(compiled))
    got, want = compiled(1.5, 1.2, C.copy(), A), _syrk(1.5, 1.2, C.copy(), A)
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[3, 4]) and np.isnan(got[2, 9]) and np.isinf(got[0, 19])


def test_float32_is_padded_and_integers_are_not():
    C, A = _syrk_args(dtype=np.float32)
    compiled = _compiled(_syrk, np.float32(1.5), np.float32(1.2), C.copy(), A)
    assert any(PADDED in d.message for d in _rolled(compiled))
    np.testing.assert_array_equal(compiled(np.float32(1.5), np.float32(1.2), C.copy(), A),
                                  _syrk(np.float32(1.5), np.float32(1.2), C.copy(), A))
    Ci, Ai = (np.arange(400).reshape(20, 20) % 7, np.arange(480).reshape(20, 24) % 5)
    integers = _compiled(_syrk, 3, 2, Ci.copy(), Ai)
    assert not any(PADDED in d.message for d in _rolled(integers))
    np.testing.assert_array_equal(integers(3, 2, Ci.copy(), Ai), _syrk(3, 2, Ci.copy(), Ai))


def _read_elsewhere(C, A, totals):
    """Each row's update is also summed: its values reach more than the write."""
    for i in range(A.shape[0]):
        for k in range(A.shape[1]):
            update = A[i, k] * A[:i + 1, k]
            C[i, :i + 1] += update
            totals[i] += update.sum()
    return C, totals


def test_a_write_whose_values_are_read_elsewhere_is_not_padded():
    C, A = _syrk_args(seed=2)
    module = tk.jit(_read_elsewhere).lower(C, A, np.zeros(20)).hlo
    assert window_padding.pad_window_writes(module, 1) is None
    got = _compiled(_read_elsewhere, C.copy(), A, np.zeros(20))(C.copy(), A, np.zeros(20))
    want = _read_elsewhere(C.copy(), A, np.zeros(20))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-13)


def test_padded_writes_in_no_loop_are_writes_again():
    """A few writes of varying length that no loop holds (each does something else): the
    program keeps the writes it had, no mask."""
    def steps(C, v):
        C[0, :2] = v[:2] * 3.0
        C[1, :3] = (v[:3] - 1.0) * 2.0
        C[2, :5] = -v[:5] / 7.0
        C[3, :7] = np.sqrt(v[:7]) + 1.0
        return C

    C, v = np.zeros((4, 9)), np.random.default_rng(3).random(9)
    padded = window_padding.pad_window_writes(tk.jit(steps).lower(C, v).hlo, 1)
    assert padded is not None and len(padded[1]) == 4
    compiled = _compiled(steps, C.copy(), v)
    ops = {i.opcode for c in compiled.optimized_hlo.computations for i in c.instructions}
    assert "iota" not in ops
    np.testing.assert_array_equal(compiled(C.copy(), v), steps(C.copy(), v))


def test_long_rows_and_whole_rows_are_never_padded(monkeypatch):
    C, A = _syrk_args()
    monkeypatch.setattr(window_padding, "MAX_PADDED", 19)
    assert not any(PADDED in d.message for d in _rolled(_compiled(_syrk, 1.5, 1.2, C, A)))
    monkeypatch.undo()

    def whole_rows(C, A):
        for k in range(A.shape[1]):
            C[k % 20, :] += A[:, k]
        return C
    module = tk.jit(whole_rows).lower(C, A).hlo
    assert window_padding.pad_window_writes(module, 1) is None


def test_a_start_the_write_would_clamp_is_not_padded():
    """dynamic-update-slice clamps a start past ``N - length`` (XLA's rule): such a write is
    not where a mask at ``[start, start + length)`` would put it, so it is left alone."""
    from toolkit.ir import dtypes
    from toolkit.ir.builder import ComputationBuilder, NameUniquer
    from toolkit.ir.shapes import Shape

    f64 = dtypes.from_numpy(np.dtype(np.float64))
    b = ComputationBuilder("entry", NameUniquer())
    target = b.parameter(0, Shape(f64, (4, 6)))
    x = b.parameter(1, Shape(f64, (6,)))
    window = b.add("slice", (x,), {"slice": ((0, 3, 1),)})
    update = b.add("reshape", (b.add("multiply", (window, window)),), shape=Shape(f64, (1, 3)))
    row = b.constant(np.array(1, np.int64))
    written = {start: window_padding._written_row(b.add(
        "dynamic-update-slice", (target, update, row, b.constant(np.array(start, np.int64)))))
        for start in (0, 3, 4)}
    assert written[0] is not None and written[0][3:] == (0, 3)
    assert written[3] is not None and written[4] is None


def test_padded_dots_of_rewritten_rows_left_in_no_loop_are_dots_again():
    """Dots of windows of rows that window padding rewrites (C, after syrk's padded writes),
    which no loop holds: padded by contraction padding first, they are found again in window
    padding's module and go back to the dots they were, no mask left."""
    def syrk_then_dots(alpha, beta, C, A):
        C = _syrk(alpha, beta, C, A)
        return C, [C[0, :2] @ C[1, :2], np.sin(C[2, :3] @ C[3, :3]), C[4, :5] @ C[5, :5],
                   C[6, :7] @ C[7, :7], np.flip(C[8, :9]) @ C[9, :9], C[10, :11] @ C[11, :11],
                   C[12, :13] @ C[13, :13], C[14, :15] @ C[15, :15]]

    C, A = _syrk_args(seed=4)
    compiled = _compiled(syrk_then_dots, 1.5, 1.2, C.copy(), A)
    assert any(PADDED in d.message for d in _rolled(compiled))
    entry = compiled.optimized_hlo.entry.instructions
    assert sum(i.opcode == "dot" for i in entry) >= 8 and not any(
        i.opcode == "iota" for i in entry)
    got_c, got_dots = compiled(1.5, 1.2, C.copy(), A)
    want_c, want_dots = syrk_then_dots(1.5, 1.2, C.copy(), A)
    np.testing.assert_array_equal(got_c, want_c)
    np.testing.assert_allclose(got_dots, want_dots, rtol=1e-14)
