"""Contraction padding (passes/contraction_padding.py, run by loop rolling): the vector dots of a
triangular nest, whose lengths differ trip by trip, are computed over whole rows with the
products outside masked, so that the nest's loops roll and share one body. NumPy's values on
every backend (to the last bits of a sum), nothing outside a window leaking in (inf, NaN,
values not yet written), integer sums wrapping as NumPy's, and dots that end up in no loop back
as they were."""
import numpy as np
import pytest

import toolkit as tk
import toolkit.passes.contraction_padding as contraction_padding
import toolkit.passes.loop_rolling as loop_rolling
from toolkit.ir.queries import known_trip_count
from toolkit.ir.structural import exact_key

from test_kernel_sharing import _flipped_recurrence as _durbin  # (PolyBench's durbin)
from test_loop_rolling import _compiled, _rolled, _whiles  # (the same questions of a compile)

BACKENDS = ["cpu", "interpreter", "gpu-simulated"]


@pytest.fixture(autouse=True)
def _long_program_rules(monkeypatch):
    """The suite's programs are small: loop rolling's rules for long programs apply to them."""
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")
    monkeypatch.setattr(loop_rolling, "SHORT_LOOPS_FROM", 0)
    monkeypatch.setattr(loop_rolling, "MIN_INSTRUCTIONS", 256)


def _trisolv(L, x, b):  # npbench's forward substitution, as its NumPy port writes it
    for i in range(x.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return x


def _lu(A):  # PolyBench's LU without pivoting, element by element
    for i in range(A.shape[0]):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, A.shape[0]):
            A[i, j] -= A[i, :i] @ A[:i, j]
    return A


def _system(n, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    L = np.tril(rng.random((n, n)) + 0.5).astype(dtype) + n * np.eye(n, dtype=dtype)
    return L, np.zeros(n, dtype), rng.random(n).astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_forward_substitution_rolls_into_one_loop_with_padded_dots(backend):
    L, x, b = _system(60)
    compiled = _compiled(_trisolv, L, x, b, backend=backend)
    (decision,) = _rolled(compiled)
    assert "dot(s) of varying length are computed over whole rows of 60" in decision.message
    assert "last bits may differ from BLAS's" in decision.message
    (loop,) = _whiles(compiled)
    assert known_trip_count(loop) >= 50  # (the first trips, windows of 0 and 1: unrolled)
    got = np.asarray(tk.device_get(compiled(L, x.copy(), b)))
    np.testing.assert_allclose(got, _trisolv(L, x.copy(), b), rtol=1e-13)


def test_nothing_outside_a_window_leaks_in():
    """The padded rows hold what the dot never read: infinities and NaN above L's diagonal,
    and the solution's entries not yet computed (NaN here). A product outside the window is
    selected away, never multiplied by a 0 (inf * 0 is NaN); the result is NumPy's, finite."""
    L, _, b = _system(48)
    L[np.triu_indices(48, 1)] = np.inf
    L[0, 5] = L[7, 30] = np.nan
    start = np.full(48, np.nan)
    compiled = _compiled(_trisolv, L, start, b)
    assert _rolled(compiled)
    got = compiled(L, start.copy(), b)
    want = _trisolv(L, start.copy(), b)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_integer_sums_wrap_as_numpys_dots_do():
    """int64 windows whose dots overflow: the masked sum wraps exactly as NumPy's integer dot,
    bit for bit (no float in between, no rounding)."""
    def accumulate(L, y, b):
        for i in range(y.shape[0]):
            y[i] = b[i] - L[i, :i] @ y[:i]
        return y

    rng = np.random.default_rng(3)
    n = 40
    L = np.tril(rng.integers(-2**40, 2**40, (n, n)))
    b = rng.integers(-2**62, 2**62, n)
    compiled = _compiled(accumulate, L, np.zeros(n, np.int64), b)
    assert _rolled(compiled)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(compiled(L, np.zeros(n, np.int64), b),
                                      accumulate(L, np.zeros(n, np.int64), b))


def test_an_lu_nests_inner_loops_share_their_bodies():
    """Padded, the inner loops of every row are alike (whole rows, masks at lifted bounds):
    a few bodies serve the whole nest, where each row's loops had bodies of their own."""
    A = np.random.default_rng(1).random((28, 28)) + 28 * np.eye(28)
    compiled = _compiled(_lu, A.copy())
    loops = _whiles(compiled)
    assert len(loops) >= 30, len(loops)
    bodies = {exact_key(loop.attrs["body"]) for loop in loops}
    assert len(bodies) <= 6, len(bodies)
    np.testing.assert_allclose(compiled(A.copy()), _lu(A.copy()), rtol=1e-12)


def test_float32_is_padded_and_float16_is_not():
    """NumPy's half-precision dot adds in float32, which a half reduction would not: float16
    dots stay dots (and their loop unrolled); float32 ones are padded."""
    L, x, b = _system(48, np.float32)
    compiled = _compiled(_trisolv, L, x, b)
    assert "whole rows of 48" in _rolled(compiled)[0].message
    np.testing.assert_allclose(compiled(L, x.copy(), b), _trisolv(L, x.copy(), b), rtol=1e-5)
    half = _compiled(_trisolv, *(a.astype(np.float16) for a in _system(48)))
    assert not any("whole rows" in d.message for d in _rolled(half))


def _windows_apart(a, c):
    """Each dot's windows start at different places (``a[1:j + 1] @ c[:j]``): they would not
    line up padded, so these stay dots."""
    for j in range(2, a.shape[0] - 1):
        c[j] = a[1:j + 1] @ c[:j] + 1.0
    return c


def test_windows_that_do_not_line_up_stay_dots():
    a = np.random.default_rng(2).random(50)
    compiled = _compiled(_windows_apart, a, np.ones(50))
    assert not any("whole rows" in d.message for d in _rolled(compiled))
    ops = {i.opcode for c in compiled.optimized_hlo.computations for i in c.instructions}
    assert "dot" in ops
    np.testing.assert_allclose(compiled(a, np.ones(50)), _windows_apart(a, np.ones(50)),
                               rtol=1e-13)


def test_padded_dots_left_in_no_loop_are_dots_again():
    """A program with a rolled nest and, after it, dots of varying length that no loop holds
    (each trip does something else): those go back to the dots they were."""
    def solve_then_moments(L, x, b, v):
        x = _trisolv(L, x, b)
        moments = [np.sin(v[:2] @ v[:2]), np.cos(v[:3] @ v[:3]), np.exp(-(v[:5] @ v[:5])),
                   np.sqrt(v[:7] @ v[:7]), np.tanh(v[:11] @ v[:11]), np.abs(v[:13] @ v[:13]),
                   np.log1p(v[:17] @ v[:17]), np.arctan(v[:19] @ v[:19])]
        return x, moments

    L, x, b = _system(48)
    v = np.random.default_rng(4).random(40)
    compiled = _compiled(solve_then_moments, L, x, b, v)
    assert len(_rolled(compiled)) == 1
    dots = [i for i in compiled.optimized_hlo.entry.instructions if i.opcode == "dot"]
    assert len(dots) >= 8, [i.opcode for i in compiled.optimized_hlo.entry.instructions]
    got_x, got_m = compiled(L, x.copy(), b, v)
    want_x, want_m = solve_then_moments(L, x.copy(), b, v)
    np.testing.assert_allclose(got_x, want_x, rtol=1e-13)
    np.testing.assert_allclose(got_m, want_m, rtol=1e-14)


def test_small_programs_and_long_rows_are_never_padded(monkeypatch):
    """Below loop rolling's SHORT_LOOPS_FROM, and for rows longer than MAX_PADDED, nothing is
    padded (a trip computes at most MAX_PADDED products more than it did)."""
    L, x, b = _system(48)
    monkeypatch.setattr(loop_rolling, "SHORT_LOOPS_FROM", 10**9)
    assert not any("whole rows" in d.message for d in _rolled(_compiled(_trisolv, L, x, b)))
    monkeypatch.setattr(loop_rolling, "SHORT_LOOPS_FROM", 0)
    monkeypatch.setattr(contraction_padding, "MAX_PADDED", 47)
    assert not any("whole rows" in d.message for d in _rolled(_compiled(_trisolv, L, x, b)))


def _symm(alpha, beta, C, A, B):  # PolyBench's symm, as its NumPy port writes it
    temp2 = np.empty((C.shape[1], ), dtype=C.dtype)
    C *= beta
    for i in range(C.shape[0]):
        for j in range(C.shape[1]):
            C[:i, j] += alpha * B[i, j] * A[i, :i]
            temp2[j] = B[:i, j] @ A[i, :i]
        C[i, :] += alpha * B[i, :] * A[i, i] + alpha * temp2
    return C


def test_symms_rows_share_their_loop_bodies_once_dots_and_writes_are_padded():
    """symm's inner loops roll unpadded (within a row every trip's dot and column write have
    one length), one body a row. With its dots and its writes ``C[:i, j] += ...`` padded
    (window_padding), every row's loop is alike: a few bodies serve them all."""
    rng = np.random.default_rng(6)
    n, m = 24, 16
    C, A, B = rng.random((n, m)), rng.random((n, n)), rng.random((n, m))
    compiled = _compiled(_symm, 1.5, 1.2, C.copy(), A, B)
    rolled = _rolled(compiled)
    assert len(rolled) >= 10 and all("whole rows" in d.message for d in rolled[2:])
    assert len({exact_key(loop.attrs["body"]) for loop in _whiles(compiled)}) <= 4
    np.testing.assert_allclose(compiled(1.5, 1.2, C.copy(), A, B), _symm(1.5, 1.2, C.copy(), A, B),
                               rtol=1e-13)


def _one_length(A, B, out):
    """Every trip's dot has the same windows (``[1:6]`` of a row): one loop rolls unpadded."""
    for j in range(A.shape[0]):
        out[j] = A[j, 1:6] @ B[j, 1:6] + 1.0
    return out


def test_padding_is_kept_only_where_it_leaves_less_to_compile(monkeypatch):
    """Where the trips roll unpadded into one loop, padding would only lengthen its body: the
    dots stay dots (though they could be padded)."""
    from toolkit.passes.contraction_padding import _padded_pair

    rng = np.random.default_rng(7)
    A, B = rng.random((300, 40)), rng.random((300, 40))
    dots = [i for i in tk.jit(_one_length).lower(A, B, np.ones(300)).hlo.entry.instructions
            if i.opcode == "dot"]
    assert len(dots) == 300 and all(_padded_pair(d) is not None for d in dots)
    compiled = _compiled(_one_length, A, B, np.ones(300))
    rolled = _rolled(compiled)
    assert len(rolled) == 1 and "whole rows" not in rolled[0].message
    np.testing.assert_allclose(compiled(A, B, np.ones(300)), _one_length(A, B, np.ones(300)),
                               rtol=1e-13)


def test_whole_rows_are_not_padded():
    """A dot of whole columns (Gram-Schmidt's ``A[:, k] @ A[:, k]``) has nothing to pad."""
    from toolkit.passes.contraction_padding import _padded_pair

    def norms(A):
        return [A[:, k] @ A[:, k] for k in range(A.shape[1])] + [A[:3, 0] @ A[:3, 1]]

    module = tk.jit(norms).lower(np.ones((5, 4))).hlo
    dots = [i for i in module.entry.instructions if i.opcode == "dot"]
    assert [_padded_pair(d) is not None for d in dots] == [False] * 4 + [True]


@pytest.mark.parametrize("backend", BACKENDS)
def test_windows_read_backwards_are_padded_and_durbins_recursion_rolls(backend):
    """``np.flip(r[:k]) @ y[:k]`` and ``y[:k] += alpha * np.flip(y[:k])``: each trip's windows
    grow, and half of them are read backwards. Padded (the reversed row shifted to line up
    with the window), the trips are alike and roll into one loop; NumPy's values."""
    r = np.random.default_rng(8).random(64) * 0.1
    compiled = _compiled(_durbin, r, backend=backend)
    (decision,) = _rolled(compiled)
    assert "dot(s) of varying length" in decision.message
    assert "write(s) of varying length" in decision.message
    (loop,) = _whiles(compiled)
    assert known_trip_count(loop) >= 56  # (of 63: k = 1, one element, stays a dot; the loop
    # starts where trips read the previous trip alike, a few trips in)
    got = np.asarray(tk.device_get(compiled(r)))
    np.testing.assert_allclose(got, _durbin(r), rtol=1e-12)


def _backwards(M, a, out):
    """Reversed windows of rows and of columns, starting past 0 (``[1:k]``), one of them the
    dot's right operand, and a reversed window written back reversed."""
    for k in range(3, out.shape[0]):
        out[k] = M[k, 1:k][::-1] @ a[1:k] + a[1:k] @ np.flip(M[1:k, k])
        a[1:k] = np.flip(a[1:k]) * 0.5 + out[k]
    return out, a


def test_nothing_outside_a_window_read_backwards_leaks_in():
    """Everywhere outside the windows M holds inf and NaN; the padded reversed rows carry
    them and the pad's zeros into the masked lanes, which are selected away: NumPy's values,
    finite."""
    n = 40
    rng = np.random.default_rng(9)
    M = rng.random((n, n))
    M[:, 0] = M[0, :] = np.inf
    M[np.triu_indices(n)] = np.nan
    M[np.tril_indices(n)] = np.where(np.tril(np.ones((n, n)), -1)[np.tril_indices(n)] > 0,
                                     M[np.tril_indices(n)], np.inf)
    M2 = M.copy()
    for k in range(n):  # (the windows read: M[k, 1:k] and M[1:k, k], finite)
        M2[k, 1:k] = rng.random(max(k - 1, 0))
        M2[1:k, k] = rng.random(max(k - 1, 0))
    a = rng.random(n)
    compiled = _compiled(_backwards, M2, a.copy(), np.zeros(n))
    assert any("dot(s) of varying length" in d.message for d in _rolled(compiled))
    got_out, got_a = compiled(M2, a.copy(), np.zeros(n))
    want_out, want_a = _backwards(M2, a.copy(), np.zeros(n))
    assert np.isfinite(got_out).all() and np.isfinite(want_out).all()
    np.testing.assert_allclose(got_out, want_out, rtol=1e-12)
    np.testing.assert_allclose(got_a, want_a, rtol=1e-12)


def test_padded_backward_dots_left_in_no_loop_are_dots_again():
    """Dots of reversed windows that no loop holds go back to what they were: the slice, the
    reshape of a row and the reverse, then the dot."""
    def solve_then_lags(L, x, b, M):
        x = _trisolv(L, x, b)
        return x, [np.flip(M[0, :2]) @ M[1, :2], np.flip(M[:3, 2]) @ M[:3, 3],
                   np.sin(np.flip(M[4, :5]) @ M[5, :5]), np.flip(M[6, :7]) @ M[7, :7],
                   np.cos(np.flip(M[8, :11]) @ M[9, :11]), np.flip(M[:13, 10]) @ M[:13, 11],
                   np.flip(M[12, :17]) @ M[13, :17], np.flip(M[14, :19]) @ M[15, :19]]

    L, x, b = _system(48)
    M = np.random.default_rng(10).random((20, 24))
    compiled = _compiled(solve_then_lags, L, x, b, M)
    assert len(_rolled(compiled)) == 1
    entry = compiled.optimized_hlo.entry.instructions
    assert sum(i.opcode == "dot" for i in entry) >= 8 and not any(
        i.opcode == "pad" for i in entry)
    got_x, got_lags = compiled(L, x.copy(), b, M)
    want_x, want_lags = solve_then_lags(L, x.copy(), b, M)
    np.testing.assert_allclose(got_x, want_x, rtol=1e-13)
    np.testing.assert_allclose(got_lags, want_lags, rtol=1e-14)
