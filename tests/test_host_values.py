"""Integer values Python asks for in a call's first run, computed on the host from the values
the call holds (toolkit/jitting/host_values.py) instead of a graph break's cut and run."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.jitting.host_values import HOST_VALUE_LIMIT


def csr_product(row, col, val, x):
    y = np.empty(row.size - 1)
    for i in range(row.size - 1):
        y[i] = val[row[i]:row[i + 1]] @ x[col[row[i]:row[i + 1]]]
    return y


def _csr(seed, n=12):
    rng = np.random.default_rng(seed)
    dense = (rng.random((n, n)) < 0.3) * rng.random((n, n))
    row = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int64)
    return row, np.nonzero(dense)[1].astype(np.int64), dense[dense != 0], rng.random(n)


@pytest.mark.parametrize("fallback", [True, False])
def test_row_bounds_read_from_an_argument_need_no_segment_and_later_calls_see_new_data(fallback):
    """Each row's bounds are an integer slice of an argument: computed on the host, so the
    first call runs one segment (its end) where it ran one per bound; every later call, with
    other row pointers, still gives NumPy's product (the first call's program holds its
    bounds, and later calls trace or replay their own)."""
    f = tk.jit(csr_product, backend="cpu", numpy_fallback=fallback)
    args = _csr(0)
    np.testing.assert_allclose(f(*args), csr_product(*args), rtol=1e-14)
    report = f.graph_breaks
    assert report.break_count == 4 * 12, report.text  # (asked for: the report's breaks)
    assert len(report.segments) == 1, report.text  # (only the call's end ran)
    for seed in (1, 2, 3, 0):
        args = _csr(seed)
        np.testing.assert_allclose(f(*args), csr_product(*args), rtol=1e-14)


def test_a_value_of_float_arithmetic_still_breaks():
    """A float computation could differ from compiled code in its last bit: such a value is
    the segment's to compute, as before."""
    def halve_while_large(x):
        for _ in range(3):
            if (x * 1.5).sum() > 1.0:
                x = x / 2
        return x

    f = tk.jit(halve_while_large, backend="cpu")
    x = np.linspace(0, 2, 8)
    np.testing.assert_array_equal(f(x), halve_while_large(x))
    assert len(f.graph_breaks.segments) > 1


def test_an_integer_updated_step_by_step_is_computed_from_the_values_found_before():
    """A checksum updated bit by bit: each bit's test walks back only to the values the host
    computed for the bits before, so the whole call is one segment (where it was 49), with
    NumPy's result."""
    def checksum(data):
        crc = np.full((), 0xFFFF, np.uint16)
        for k in range(data.shape[0]):
            crc = crc ^ data[k].astype(np.uint16)
            for _ in range(8):
                if crc & 1:
                    crc = (crc >> 1) ^ np.uint16(0xA001)
                else:
                    crc = crc >> 1
        return crc

    data = np.random.default_rng(5).integers(0, 256, 6).astype(np.uint8)
    f = tk.jit(checksum, backend="cpu", numpy_fallback=False)
    assert int(f(data)) == int(checksum(data))
    report = f.graph_breaks
    assert report.break_count == 48 and len(report.segments) == 1, report.text
    other = data[::-1].copy()
    assert int(f(other)) == int(checksum(other))  # (the second call: replayed breaks)


def test_a_value_whose_cone_passes_the_limit_breaks():
    def long_cone(x):
        y = x
        for k in range(HOST_VALUE_LIMIT + 8):
            y = y + k
        return y * 2 if y[0] > 0 else y * 3

    x = np.arange(4, dtype=np.int64)
    f = tk.jit(long_cone, backend="cpu")
    np.testing.assert_array_equal(f(x), long_cone(x))
    assert len(f.graph_breaks.segments) == 2, f.graph_breaks.text


def test_a_table_filled_cell_by_cell_on_integer_comparisons_is_one_segment():
    """PolyBench's nussinov pattern: an int() of an integer comparison in every cell. Each was
    a segment of its own, cut and run (435 for n=30); computed on the host, the call is one."""
    def table_of(n, seq):
        table = np.zeros((n, n), np.int32)
        for i in range(n - 1, -1, -1):
            for j in range(i + 1, n):
                pair = int(seq[i] + seq[j] == 3)
                table[i, j] = max(table[i, j - 1], table[i + 1, j - 1] + pair)
        return table

    seq = np.random.default_rng(0).integers(0, 4, 9).astype(np.int32)
    f = tk.jit(table_of, backend="cpu")
    np.testing.assert_array_equal(f(9, seq), table_of(9, seq))
    assert len(f.graph_breaks.segments) == 1, f.graph_breaks.text
    other = seq[::-1].copy()
    np.testing.assert_array_equal(f(9, other), table_of(9, other))


LOG: list = []


def read_then_ask(x, idx):
    v = x[idx[0]]  # (a traced index: NumPy's IndexError is a check of the program)
    k = int(idx[1])  # (an integer the host computes)
    LOG.append(k)
    return v * k


def test_a_failed_check_raises_where_the_break_would_not_after_python_went_on():
    """A value computed on the host must not carry Python past a check that fails: the break
    cuts and runs the segment there, which raises NumPy's error before the next line runs."""
    x = np.arange(5.0)
    f = tk.jit(read_then_ask, backend="cpu")
    LOG.clear()
    with pytest.raises(IndexError):
        f(x, np.array([7, 1]))
    assert LOG == []
    assert f(x, np.array([3, 2])) == 6.0 and LOG == [2]


def gather_then_ask(x, idx):
    v = x[idx[:2]]  # (a gather: its check reduces over the indices)
    k = int(idx[2])
    LOG.append(k)
    return v * k


def test_a_failed_gather_check_raises_before_python_goes_on():
    x = np.arange(5.0)
    f = tk.jit(gather_then_ask, backend="cpu")
    LOG.clear()
    with pytest.raises(IndexError):
        f(x, np.array([1, 9, 2]))
    assert LOG == []
    np.testing.assert_array_equal(f(x, np.array([1, 4, 2])), [2.0, 8.0])
