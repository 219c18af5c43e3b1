"""In-place NumPy under jit: augmented assignment, item assignment through basic indices and
views, out=, np.copyto, fill and masked assignment. The caller's arrays end exactly as NumPy
leaves them; what toolkit cannot express raises, naming the operation."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import toolkit as tk
from toolkit.frontend.errors import UnsupportedNumpyError

BACKENDS = ["interpreter", "cpu", "gpu-simulated"]


def _same_as_numpy(fn, *args, backend="interpreter"):
    ours = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = tk.jit(fn, backend=backend)(*ours)
    want = fn(*theirs)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o, t)  # the arguments, after the call
    if want is not None:
        for g, w in zip(
            got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
        ):
            np.testing.assert_allclose(g, w)
    return got


@pytest.mark.parametrize("backend", BACKENDS)
def test_augmented_assignment_writes_the_callers_array(backend):
    def k(x, y):
        x += y
        x *= 2

    _same_as_numpy(k, np.ones(3), np.arange(3.0), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_row_updates_and_a_stencil_into_the_argument(backend):
    def rows(a):
        for i in range(1, a.shape[0]):
            a[i, :] = a[i - 1, :] * 0.5 + a[i, :]
        a[1:-1, 1:-1] += 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1])
        a[::2, -1] = -1
        a[:, ::-2] *= 3
        return a.sum()

    _same_as_numpy(rows, np.arange(20.0).reshape(4, 5), backend=backend)


def test_writes_through_views_reach_their_base_and_later_reads_agree():
    def views(a):
        b = a[1:]
        c = b[:, ::-1]
        b[0] = 7.0
        c[1, 0] = -3.0
        d = a[None, 2]
        a[2, 1] = 11.0  # the view d sees it
        return b.sum(), c.copy(), d + 0

    _same_as_numpy(views, np.arange(12.0).reshape(4, 3))


def test_out_copyto_fill_and_masked_assignment():
    def misc(x, y):
        np.multiply(x, 2, out=x)
        np.add(x, y, out=y)
        x[x > 3] = 0
        z = np.zeros_like(y)
        np.copyto(z, y)
        y.fill(5)
        return z

    _same_as_numpy(misc, np.arange(4.0), np.ones(4))


def test_python_scalar_arguments_rebind_as_python_numbers_do():
    def f(x, s):
        s += 1
        x += s
        return s

    x = np.zeros(2)
    assert tk.jit(f)(x, 2) == 3
    np.testing.assert_array_equal(x, [3, 3])


def test_dtype_rules_of_in_place_writes_are_numpys():
    def int_plus_float(x):
        x += 0.5

    with pytest.raises(TypeError):
        int_plus_float(np.ones(2, np.int64))
    with pytest.raises(TypeError, match="same_kind"):
        tk.jit(int_plus_float)(np.ones(2, np.int64))

    def assign_float_to_int(x):
        x[0] = 2.7

    _same_as_numpy(assign_float_to_int, np.ones(2, np.int64))

    def too_big(x):
        x[0] = 2 ** 40

    with pytest.raises(OverflowError):
        tk.jit(too_big)(np.ones(2, np.int32))


def test_read_only_and_aliased_arguments_are_refused():
    def k(x, y):
        x += y

    ro = np.ones(3)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        tk.jit(k)(ro, np.ones(3))
    a = np.ones(3)
    with pytest.raises(ValueError, match="shares memory"):
        tk.jit(k)(a, a)
    np.testing.assert_array_equal(a, np.ones(3))
    # views: of each other, of one base, of a base that owns its memory and of one that does not
    base = np.arange(8.0)
    borrowed = np.frombuffer(bytearray(base.tobytes()))  # (its base: a bytearray)
    for x, y in ((base[:4], base[2:6]), (base[4:], base[:4]), (base[1:5], base[:4]),
                 (base[:4].copy(), base[:4]), (borrowed[:4], base[4:])):
        shares = np.may_share_memory(x, y)
        if shares:
            with pytest.raises(ValueError, match="shares memory"):
                tk.jit(k)(x, y)
        else:
            tk.jit(k)(x, y)
    assert not np.may_share_memory(base, np.ones(3))  # (two owners: no question asked)


def test_writing_through_an_untracked_view_is_an_error_not_a_lost_write():
    def f(x):
        y = x.T.reshape(4)  # (NumPy: a view or a copy, as the layout of x.T decides)
        y[0] = 5

    with pytest.raises(UnsupportedNumpyError, match="np.reshape"):
        tk.jit(f)(np.zeros((2, 2)))

    def g(x):  # (a reshape of the argument itself: a view of a C-contiguous one)
        y = x.reshape(2, 2)
        y[0, 0] = 5

    x = np.zeros(4)
    tk.jit(g)(x)
    assert x[0] == 5


def test_mutated_arguments_print_as_input_output_alias_and_parse_back():
    def k(x, y):
        x += y
        return y * 2

    lowered = tk.jit(k).lower(np.ones(3, np.float32), np.ones(3, np.float32))
    text = lowered.as_text()
    assert text.splitlines()[0] == (
        "HloModule jit_k, input_output_alias={ {1}: (0, {}, must-alias) }, "
        "entry_computation_layout={(f32[3]{0}, f32[3]{0})->(f32[3]{0}, f32[3]{0})}"
    )
    module = tk.hlo.parse(text)
    x, y = np.ones(3, np.float32), np.arange(3, dtype=np.float32)
    out = tk.hlo.run(module, x, y)
    np.testing.assert_array_equal(out[1], x + y)


def _stencil(a):
    a[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])


def _add_row(a, y):
    a += y


def _add_inner(a, y):
    a[1:-1] += 1.5


def _through_a_view(a, y):
    v = a[2:]
    v *= 3


def _reversed(a, y):
    a += a[::-1]


def _scaled_then_set(a, y):
    a *= 2
    a[0] = y


# PolyBench's jacobi: each array written from the other, trip after trip
def _two_arrays_in_turn(a, y):
    for _ in range(3):
        y[1:-1] = 0.5 * (a[0, :-2] + a[0, 2:])
        a[0, 1:-1] = 0.5 * (y[:-2] + y[2:])


@pytest.mark.parametrize(
    "fn, in_place",
    [
        (_add_row, True),
        (_add_inner, True),
        (_through_a_view, True),
        (_reversed, False),
        (_scaled_then_set, False),
        (_two_arrays_in_turn, True),
    ],
)
def test_the_cpu_backend_writes_donated_arguments_in_place(fn, in_place):
    """``A += y`` and ``A[1:-1] += ...`` write the caller's array directly: its buffer is the
    kernel's output, and nothing is copied back; so does a chain of writes (an unrolled loop's
    trips), every link in the caller's array. Kernels that read the argument
    elsewhere than where they write (``A += A[::-1]``) compute into a new buffer and copy back."""
    make = lambda: (np.arange(36.0).reshape(6, 6), np.arange(6.0))  # noqa: E731
    a, y = make()
    expected, ey = make()
    fn(expected, ey)
    jitted = tk.jit(fn, backend="cpu")
    address = a.ctypes.data
    jitted(a, y)
    np.testing.assert_array_equal(a, expected)
    assert a.ctypes.data == address
    executable = jitted.compiled(a, y)._executable
    assert bool(executable.in_place_outputs) == in_place
    if in_place:  # the executable returns the caller's array itself: no copy made, none to make
        b, yb = make()
        results = executable([b, yb])
        assert all(r is arg for r, arg in zip(results, (b, yb)))  # (both, where both are written)
        np.testing.assert_array_equal(b, expected)
        np.testing.assert_array_equal(yb, ey)


def test_a_stencil_into_its_argument_computes_its_update_first_then_writes_in_place():
    """The stencil reads its argument where it writes: fused into the write, the kernel would
    read elements already written, so it would compute into a copy of the whole array. The
    update runs first instead, as a kernel of its own (a fusion decision says why), and the
    window is then written into the caller's array in place."""
    a = np.random.default_rng(0).standard_normal((7, 9))
    expected = a.copy()
    _stencil(expected)
    jitted = tk.jit(_stencil, backend="cpu")
    jitted(a)
    np.testing.assert_array_equal(a, expected)
    compiled = jitted.compiled(a)
    assert compiled._executable.in_place_outputs == {0}
    assert any(d.reason == "READS_UPDATED_BUFFER" for d in compiled.fusion_decisions)
    assert [d.reason for d in compiled.buffer_decisions] == ["IN_PLACE_ARGUMENT"]


def test_non_contiguous_and_failed_calls_leave_arguments_as_numpy_would():
    base = np.arange(72.0).reshape(6, 12)
    a = base[:, ::2]  # not contiguous: computed in a copy, then written back
    expected = a.copy()
    _add_row(expected, np.arange(6.0))
    tk.jit(_add_row, backend="cpu")(a, np.arange(6.0))
    np.testing.assert_array_equal(a, expected)
    np.testing.assert_array_equal(base[:, 1::2], np.arange(72.0).reshape(6, 12)[:, 1::2])

    def checked(a, i):
        a += 1.0
        a[i] = 0.0  # a traced index: checked after the call, so the argument is not donated

    jitted = tk.jit(checked, backend="cpu")
    b = np.ones((3, 2))
    assert "may-alias" in jitted.lower(b, np.int64(0)).as_text()
    with pytest.raises(IndexError):
        jitted(b, np.int64(7))
    np.testing.assert_array_equal(b, np.ones((3, 2)))


def test_the_profile_records_the_mutated_arguments():
    def k(x, y):
        x += y

    with tk.profile() as prof:
        tk.jit(k, backend="cpu")(np.ones(2), np.ones(2))
    assert prof.compiles[-1].mutated_arguments == ("x",)
    assert prof.compiles[-1].written_in_place == ("x",)


# ---- random writes through random views, against NumPy ---------------------------------------
_slices = st.builds(slice, st.integers(-5, 5) | st.none(), st.integers(-5, 5) | st.none(),
                    st.sampled_from([None, 1, 2, -1, -2]))
_index = st.one_of(st.integers(-4, 3), _slices, st.just(Ellipsis))
_steps = st.lists(st.tuples(st.sampled_from(["view", "set", "iadd"]), st.tuples(_index, _slices),
                            st.floats(-3, 3)), min_size=1, max_size=6)


def _run(steps, a):
    arrays = [a]
    for kind, key, value in steps:
        target = arrays[-1]
        try:
            if kind == "view":
                view = target[key]
                if np.ndim(view) == 0:
                    continue
                arrays.append(view)
            elif kind == "set":
                target[key] = value
            else:
                target[key] += value
        except IndexError:
            continue
    return a.sum() + sum(v.sum() for v in arrays[1:])


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_random_writes_through_views_match_numpy(backend):
    @given(_steps)
    def check(steps):
        _check_steps(steps, backend)

    check()


def _check_steps(steps, backend):
    a = np.arange(20.0).reshape(4, 5)
    theirs, ours = a.copy(), a.copy()
    want = _run(steps, theirs)
    got = tk.jit(lambda x: _run(steps, x), on_recompile="ignore", backend=backend)(ours)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.copy(),
        lambda x: np.copy(x),
        lambda x: x.astype(x.dtype),
        lambda x: +x,
        lambda x: np.positive(x),
        lambda x: np.concatenate([x]),
        lambda x: np.where(True, x, x),
        lambda x: x.reshape(3),
        lambda x: x.T,
        lambda x: np.squeeze(x),
        lambda x: x[:],
        lambda x: x[...],
        lambda x: np.moveaxis(x, 0, 0),
        lambda x: np.clip(x, -1, 1),
    ],
)
def test_writing_into_a_result_reaches_the_input_exactly_when_numpy_returns_a_view(make):
    def f(x):
        y = make(x)
        y[0] = 99.0

    _same_as_numpy(f, np.zeros(3))


def test_writes_into_read_only_or_untracked_views_raise():
    with pytest.raises(ValueError, match="read-only"):
        tk.jit(lambda x: np.broadcast_to(x, (3,)).__setitem__(0, 1.0))(np.zeros(3))

    def through_a_view_of_an_untracked_view(x):
        np.split(x, 3)[0][0] = 5.0

    with pytest.raises(UnsupportedNumpyError, match="np.split"):
        tk.jit(through_a_view_of_an_untracked_view)(np.zeros(3))

    def through_expand_dims(x):  # (a view in NumPy whatever x's layout: the write reaches x)
        np.expand_dims(x, 0)[0][1] = 5.0

    a, b = np.zeros(3), np.zeros(3)
    through_expand_dims(a)
    tk.jit(through_expand_dims)(b)
    np.testing.assert_array_equal(b, a)


def test_a_python_int_argument_stored_into_a_narrower_array_is_checked_on_every_call():
    def store(x, s):
        x[0] = s
        x[1:].fill(s)

    f = tk.jit(store)
    a = np.zeros(3, np.int32)
    f(a, 5)
    np.testing.assert_array_equal(a, [5, 5, 5])
    with pytest.raises(OverflowError):
        store(np.zeros(3, np.int32), 2 ** 40)
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        f(a, 2 ** 40)
    np.testing.assert_array_equal(a, [5, 5, 5])  # nothing was written


@pytest.mark.parametrize("fn, overwrites", [
    (lambda x, w, b: np.maximum(x @ w + b, 0.0), True),  # the epilogue writes over the product
    (lambda x, w, b: (x @ w, np.maximum(x @ w + b, 0.0)), False),  # the product is returned as well
    # read transposed: not at the index written
    (lambda x, w, b: np.tanh(x @ w) + (x @ w).T, False),
    (lambda x, w, b: (x @ w + b).astype(np.float64), False),  # another dtype: another buffer
    (lambda x, w, b: np.exp(x) @ w + b, True),
])
def test_a_products_epilogue_is_written_over_the_product(fn, overwrites):
    """An elementwise kernel that reads a matrix product last, at the index it writes, writes
    its result into the product's buffer; anything else gets a buffer of its own. Results are
    NumPy's either way."""
    rng = np.random.default_rng(3)
    x, w = (
        rng.standard_normal((64, 64)).astype(np.float32),
        rng.standard_normal((64, 64)).astype(np.float32),
    )
    b = rng.standard_normal(64).astype(np.float32)
    c = tk.jit(fn, backend="cpu").lower(x, w, b).compile()
    steps = c._executable.steps
    dots = {s.outputs[0] for s in steps if s.kind == "dot"}
    written_over = [s for s in steps if s.kind == "kernel" and s.outputs[0] in dots]
    assert bool(written_over) == overwrites
    assert all(s.extra["spec"].in_place for s in written_over)
    got, want = c(x, w, b), fn(x, w, b)
    for g, v in zip(
        got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
    ):
        assert g.dtype == v.dtype
        np.testing.assert_allclose(g, v, rtol=2e-5, atol=2e-5)


def _window_update(x, w, b):
    y = x * 2
    y[1:-1] += np.tanh(y[1:-1])  # a window of a temporary, updated in its own buffer
    return y


@pytest.mark.parametrize("fn", [
    lambda x, w, b: np.tanh(x @ w + b),  # an epilogue written over a matrix product
    _window_update,
])
def test_an_in_place_kernel_reads_through_its_output_and_needs_no_overlap_check(fn):
    """A kernel whose input and output are one buffer reads that input through the output's
    pointer: the loop vectorises with no runtime overlap check (which, with the two pointers
    equal, failed into the scalar loop on every call: 7x slower)."""
    rng = np.random.default_rng(4)
    x, w = (
        rng.standard_normal((256, 512)).astype(np.float32),
        rng.standard_normal((512, 512)).astype(np.float32),
    )
    b = rng.standard_normal(512).astype(np.float32)
    c = tk.jit(fn, backend="cpu").lower(x, w, b).compile()
    in_place = [s for s in c._executable.steps if s.kind == "kernel" and s.extra["spec"].in_place]
    assert in_place and all(s.extra["spec"].aliased_parameter is not None for s in in_place)
    assert "diff.check" not in c.as_text("llvm")
    np.testing.assert_allclose(c(x, w, b), fn(x, w, b), rtol=2e-5, atol=2e-5)
