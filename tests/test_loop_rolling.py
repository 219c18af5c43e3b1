"""Loop rolling (passes/loop_rolling.py): an unrolled Python loop whose trips trace alike up to
their offsets becomes one HLO while again, computing the very same bits as NumPy on every
backend; loops whose trips differ in anything else, or that are short, stay unrolled."""
import numpy as np
import pytest

import toolkit as tk
import toolkit.passes.loop_rolling as loop_rolling
from toolkit.ir.queries import known_trip_count
from toolkit.workloads import recursive_filter

BACKENDS = ["cpu", "interpreter", "gpu-simulated"]
FILTER = recursive_filter(np)


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", "off")


def _compiled(fn, *args, backend="cpu"):
    return tk.jit(fn, backend=backend).lower(*args).compile()


def _rolled(compiled):
    return [d for d in compiled.fusion_decisions if d.reason == "ROLLED_LOOP"]


def _whiles(compiled):
    return [i for i in compiled.optimized_hlo.entry.instructions if i.opcode == "while"]


def _filter_args(rows=16, columns=300):
    return np.random.default_rng(0).standard_normal((rows, columns)), 0.5, 0.45


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_recursive_filter_rolls_into_one_loop_with_numpys_bits(backend):
    args = _filter_args()
    compiled = _compiled(FILTER, *args, backend=backend)
    (decision,) = _rolled(compiled)
    (loop,) = _whiles(compiled)
    trips = known_trip_count(loop)
    assert 280 <= trips <= 299  # the first trips read the zeros the loop starts from: unrolled
    assert f"{trips} trips of" in decision.message and "varying: " in decision.message
    assert "workloads.py" in decision.producer_location
    np.testing.assert_array_equal(compiled(*args), FILTER(*args))
    assert '"known_trip_count":{"n":"%d"}' % trips in compiled.as_text()


def test_the_rolled_hlo_text_parses_back_and_runs():
    """The printed program (a while with XLA's known_trip_count backend_config, the body's
    dynamic-slices at counter-computed starts) is HLO text the parser reads back, and the
    reference interpreter runs it to the same bits."""
    args = _filter_args(columns=260)
    compiled = _compiled(FILTER, *args)
    text = compiled.as_text()
    assert "known_trip_count" in text and "dynamic-slice(" in text
    for backend in ("interpreter", "cpu"):  # (the cpu compile runs the pipeline again)
        (result,) = tk.hlo.run(tk.hlo.parse(text), *args, backend=backend)
        np.testing.assert_array_equal(result, FILTER(*args))


def test_the_rolled_program_is_one_trip_long():
    args = _filter_args(columns=400)
    compiled = _compiled(FILTER, *args)
    assert sum(len(c.instructions) for c in compiled.optimized_hlo.computations) < 200
    np.testing.assert_array_equal(compiled(*args), FILTER(*args))


def test_without_rolling_the_trips_stay_unrolled(monkeypatch):
    monkeypatch.setattr(loop_rolling, "MIN_TRIPS", 10**9)
    args = _filter_args()
    compiled = _compiled(FILTER, *args)
    assert not _rolled(compiled) and not _whiles(compiled)
    np.testing.assert_array_equal(compiled(*args), FILTER(*args))


def _columns_times_their_index(x):
    """An integer constant read as a value, not an offset: j itself, in x's integer dtype."""
    y = np.zeros_like(x)
    for j in range(x.shape[1]):
        y[:, j] = x[:, j] * j + (j - 3)
    return y


def _float_offsets(x):
    """A float constant that varies: 0.1 * j rounded by Python must never be recomputed."""
    y = np.zeros_like(x)
    for j in range(x.shape[1]):
        y[:, j] = x[:, j] * (0.1 * j)
    return y


def _every_other_row(x):
    """Slices with a stride: a varying start there cannot become a dynamic-slice."""
    y = np.zeros((x.shape[0], x.shape[1] // 2), x.dtype)
    for j in range(x.shape[0]):
        y[j] = x[j, j % 2::2] + 1
    return y


def _prefix_sums(x):
    """Rows that read every earlier row's result: the trips' values outlive the next trip."""
    out = [x[0]]
    for j in range(1, x.shape[0]):
        out.append(out[-1] + x[j])
    return np.stack(out)


def _column_halves(x):
    """Trips 0 and 1 read the same column (j // 2): a start that stays put for two trips is
    not a start that never moves (the slice's start is in no token; every trip's is checked)."""
    y = np.zeros_like(x)
    for j in range(x.shape[1]):
        y[:, j] = x[:, j // 2] * 2 - 1
    return y


def _late_start(x):
    """Columns 0, 0, 1, 2, 3, ...: the first two trips agree, the third breaks the pattern."""
    y = np.zeros_like(x)
    for j in range(x.shape[1]):
        y[:, j] = x[:, max(j - 1, 0)] * 3 + 1
    return y


def _short(x):
    y = np.zeros_like(x)
    for j in range(4):
        y[:, j] = x[:, j] * 2
    return y


def _whole_array_steps(x):
    for _ in range(200):
        x = x * 0.5 + 1.0
    return x


@pytest.mark.parametrize("fn, rolls, dtype", [
    (_columns_times_their_index, True, np.int32),
    (_columns_times_their_index, True, np.float64),
    (_float_offsets, False, np.float64),
    (_every_other_row, None, np.float32),
    (_prefix_sums, False, np.float64),
    (_column_halves, True, np.float64),  # (two trips a body: the column moves by one)
    (_late_start, True, np.int32),
    (_short, False, np.float64),
    (_whole_array_steps, False, np.float64),
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_what_rolls_and_what_stays_unrolled(fn, rolls, dtype, backend):
    x = (np.random.default_rng(1).standard_normal((300, 300)) * 50).astype(dtype)
    compiled = _compiled(fn, x, backend=backend)
    if rolls is not None:
        assert bool(_rolled(compiled)) == rolls, [d.message for d in _rolled(compiled)]
    got, want = compiled(x), fn(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_an_argument_written_in_place_in_a_rolled_loop():
    def fill(y, x):
        for j in range(1, y.shape[1]):
            y[:, j] = y[:, j - 1] * 0.5 + x[:, j]

    x = np.random.default_rng(2).standard_normal((8, 400))
    y, expected = np.ones((8, 400)), np.ones((8, 400))
    fill(expected, x)
    f = tk.jit(fill, backend="cpu")
    f(y, x)
    np.testing.assert_array_equal(y, expected)
    assert _rolled(f.compiled(np.ones((8, 400)), x))


def test_a_negative_zero_constant_is_never_recomputed_as_positive_zero():
    """(40 - j) * -1.0 is -0.0 at j = 40 in Python; the trip counter would make +0.0, and
    x * +0.0 has the other sign for positive x. The trips roll around that one."""
    def scaled(x):
        y = np.zeros_like(x)
        for j in range(x.shape[1]):
            y[:, j] = x[:, j] * ((40 - j) * -1.0)
        return y

    x = np.abs(np.random.default_rng(3).standard_normal((6, 400))) + 1.0
    compiled = _compiled(scaled, x)
    assert _rolled(compiled)
    got, want = compiled(x), scaled(x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert np.signbit(want[:, 40]).all()


# ---- random loops ------------------------------------------------------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402

_STEPS = {
    "previous column": lambda y, x, j, c: y[:, j - 1] * c + x[:, j],
    "neighbours": lambda y, x, j, c: x[:, j - 1] - x[:, j + 1] * c,
    "index as value": lambda y, x, j, c: x[:, j] + (j * c),
    "row window": lambda y, x, j, c: x[j % 3: j % 3 + 2, j].sum() + y[:2, j - 1],
    "scalar from a row": lambda y, x, j, c: y[:, j - 1] - x[1, j] * c,
    # a column that stays put for two trips: rolls two trips a body, never one
    "pairs": lambda y, x, j, c: x[:, j // 2] * c - 1,
}


@st.composite
def _loops(draw):
    return (draw(st.sampled_from(["int32", "float32", "float64"])), draw(st.integers(20, 60)),
            draw(st.integers(1, 5)))


# every kind of trip from every first trip (the first two trips agreeing is the risky case:
# "pairs" from an even start), with the dtype, length and constant drawn
@pytest.mark.parametrize("start", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(_STEPS))
@settings(max_examples=2)
@given(loop=_loops())
def test_random_loops_roll_with_numpys_results(name, start, loop):
    """Small thresholds, so that short random loops roll: every one computes NumPy's values,
    dtypes and signs of zero, rolled or not."""
    dtype, columns, c = loop
    step = _STEPS[name]
    rows = 2 if name == "row window" else 4

    def fill(x):
        y = np.zeros_like(x)
        for j in range(start, x.shape[1] - 1):
            y[:rows, j] = step(y, x, j, c)
        return y

    x = (np.random.default_rng(columns).standard_normal((4, columns)) * 20).astype(dtype)
    with np.errstate(all="ignore"), pytest.MonkeyPatch.context() as patch:
        patch.setattr(loop_rolling, "MIN_INSTRUCTIONS", 16)
        want = fill(x)
        compiled = _compiled(fill, x)
        got = compiled(x)
    if name != "row window":  # (its windows start at j % 3: no progression, no roll)
        assert _rolled(compiled), "the random loop did not roll: the test tests nothing"
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_a_loop_reading_an_array_python_made_after_a_graph_break():
    """After a break, a NumPy array Python makes becomes a parameter of the next segment at
    each use (its value then): each trip reads another parameter, so the trips are not alike
    and stay unrolled, and the results are NumPy's, call after call."""
    def f(x):
        flip = int(x[0, 0] > 0)  # a graph break
        w = np.arange(x.shape[0], dtype=np.float64) - flip
        y = np.zeros_like(x)
        for j in range(x.shape[1]):
            y[:, j] = x[:, j] * w + j
        return y

    x = np.random.default_rng(4).standard_normal((5, 300))
    jitted = tk.jit(f, backend="cpu")
    for value in (x, -x, x):
        np.testing.assert_array_equal(jitted(value), f(value))


def _windowed_sums(x, w):
    """A nest as people write a convolution: every (i, j) writes one window's weighted sum. The
    inner loop is shorter than MIN_INSTRUCTIONS; the nest is far longer."""
    k = w.shape[0]
    out = np.empty((x.shape[0] - k + 1, x.shape[1] - k + 1))
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = np.sum(x[i:i + k, j:j + k] * w)
    return out


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_the_inner_loops_of_a_long_nest_roll_each(backend):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((40, 40)), rng.standard_normal((3, 3))
    traced = tk.jit(_windowed_sums, backend=backend).lower(x, w)
    compiled = traced.compile()
    inner = x.shape[1] - w.shape[0] + 1
    assert len(traced.hlo.entry.instructions) > loop_rolling.MIN_INSTRUCTIONS
    assert inner * 10 < loop_rolling.MIN_INSTRUCTIONS  # each inner loop alone is short
    rolled = _rolled(compiled)
    assert len(rolled) >= x.shape[0] - w.shape[0]  # one per outer trip (the first may not)
    assert {known_trip_count(loop) for loop in _whiles(compiled)} <= {inner, inner - 1}
    # (a sum of 9 products, added in another order than NumPy's: within rounding)
    np.testing.assert_allclose(compiled(x, w), _windowed_sums(x, w), rtol=1e-12, atol=1e-14)


def _covariance_by_columns(data):  # PolyBench's covariance, as its NumPy port writes it
    m = data.shape[1]
    data = data - data.mean(axis=0)
    cov = np.zeros((m, m), dtype=data.dtype)
    for i in range(m):
        for j in range(i, m):
            cov[i, j] = np.sum(data[:, i] * data[:, j]) / (data.shape[0] - 1)
            cov[j, i] = cov[i, j]
    return cov


def test_a_triangular_nests_inner_loops_roll_into_one_body_compiled_once(monkeypatch):
    """The inner loops of ``for i: for j in range(i, m):`` differ in trip count, so the nest is
    no alike run: in a long program they roll each, with their starts and trip counts as loop
    state, so that they share one body and the CPU backend compiles it once."""
    import toolkit.backends.cpu as cpu
    from toolkit.ir.structural import exact_key

    monkeypatch.setattr(loop_rolling, "SHORT_LOOPS_FROM", 0)  # (the suite's programs are small)
    data = np.random.default_rng(5).standard_normal((30, 28))
    cpu._NESTED.clear()
    compiled = tk.jit(_covariance_by_columns).lower(data).compile()
    loops = _whiles(compiled)
    assert len(loops) >= 15, len(loops)
    trips = {known_trip_count(loop) for loop in loops}
    assert len(trips) == len(loops)  # a loop per outer trip, each its own length
    bodies = {exact_key(loop.attrs["body"]) for loop in loops}
    # (a loop whose values coincide, i = 0 with the starts that are 0 in every loop, or its
    # trip count m - i with i, has a body of its own)
    assert len(bodies) <= 3, len(bodies)
    assert len(cpu._NESTED) <= 2 * len(bodies)  # a condition and a body each, compiled once
    np.testing.assert_allclose(compiled(data), _covariance_by_columns(data), rtol=1e-13)


def test_short_loops_stay_unrolled_in_a_program_that_compiles_fast_anyway():
    data = np.random.default_rng(5).standard_normal((30, 28))
    compiled = tk.jit(_covariance_by_columns).lower(data).compile()
    assert not _whiles(compiled)


def _trmm(A, B):  # PolyBench's trmm as its NumPy port writes it: each row's loop its own shape
    for i in range(B.shape[0]):
        for j in range(B.shape[1]):
            B[i, j] += np.dot(A[i + 1:, i], B[i + 1:, j])
    return B


def test_a_long_programs_inner_loops_roll_each_where_their_shapes_differ(monkeypatch):
    """``B[i + 1:, j]`` is shorter on every outer trip, so no two inner loops share a body; in
    a long program each still rolls on its own (its trips are alike), which compiles one trip
    per row instead of every trip."""
    import toolkit.passes.contraction_padding as contraction_padding

    monkeypatch.setattr(loop_rolling, "SHORT_LOOPS_FROM", 0)  # (the suite's programs are small)
    monkeypatch.setattr(loop_rolling, "LONE_SHORT_LOOP", 40)
    # (dots left unpadded: padded, the rows' loops share one body, test_contraction_padding.py)
    monkeypatch.setattr(contraction_padding, "MAX_PADDED", 0)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((30, 30)), rng.standard_normal((30, 10))
    traced = tk.jit(_trmm).lower(a, b.copy())
    assert len(traced.hlo.entry.instructions) > loop_rolling.MIN_INSTRUCTIONS
    compiled = traced.compile()
    loops = _whiles(compiled)
    assert len(loops) >= 25, len(loops)
    # (a row's first trip may fuse with what came before it: that loop has 9)
    assert {known_trip_count(loop) for loop in loops} <= {9, 10}
    np.testing.assert_allclose(compiled(a, b.copy()), _trmm(a, b.copy()), rtol=1e-13)
    monkeypatch.setattr(loop_rolling, "LONE_SHORT_LOOP", 10 ** 9)  # lone loops stay unrolled
    assert not _whiles(tk.jit(_trmm).lower(a, b.copy()).compile())


def test_loop_bodies_alike_up_to_names_are_optimised_once(monkeypatch):
    """Each rolled inner loop of the nest has a body of its own, alike up to names: the
    pipeline optimises one of each kind, and the others are copies under fresh names (a
    nest of hundreds of loops ran the whole pipeline hundreds of times). The program still
    computes NumPy's values, and its text parses back."""
    from toolkit.profiler.events import PassEvent

    monkeypatch.setattr(loop_rolling, "SHORT_LOOPS_FROM", 0)
    data = np.random.default_rng(5).standard_normal((30, 28))
    with tk.profile() as profile:
        compiled = tk.jit(_covariance_by_columns).lower(data).compile()
    loops = _whiles(compiled)
    assert len(loops) >= 15
    fusion_runs = [e for e in profile.events if isinstance(e, PassEvent)
                   and e.pass_name == "fusion"]
    kinds = {id(c) for loop in loops for c in loop.called_computations}
    assert len(kinds) == 2 * len(loops)  # every loop its own condition and body
    assert len(fusion_runs) <= 1 + 6, len(fusion_runs)  # the entry, and a few of each kind
    names = [c.name for c in compiled.optimized_hlo.computations]
    assert len(names) == len(set(names))
    np.testing.assert_allclose(compiled(data), _covariance_by_columns(data), rtol=1e-13)
    # (the text runs through the pipeline again: sums fused anew, within rounding)
    (again,) = tk.hlo.run(tk.hlo.parse(compiled.as_text()), data, backend="cpu")
    np.testing.assert_allclose(again, compiled(data), rtol=1e-13, atol=1e-14)


def _triangle(table):  # nussinov's nest: for i: for j in range(i + 1, n): for k in range(i + 1, j)
    n = table.shape[0]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])
    return table


def _small_triangle(monkeypatch, seed: int, backend: str):
    """A 26x26 table and ``_triangle`` compiled for it, with loop rolling's thresholds lowered
    to its size (short loops roll from 0 instructions, loops from 256)."""
    monkeypatch.setattr(loop_rolling, "SHORT_LOOPS_FROM", 0)
    monkeypatch.setattr(loop_rolling, "MIN_INSTRUCTIONS", 256)
    table = np.random.default_rng(seed).integers(-50, 50, (26, 26)).astype(np.int32)
    return table, _compiled(_triangle, table.copy(), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nest_rolls_from_the_inside_out(backend, monkeypatch):
    """The innermost loops roll first (one a (i, j), with trip counts j - i - 1); then the
    trips of each j loop, which now each hold a rolled loop, are alike and roll too, the inner
    loop's trip count loop state (it differs trip by trip: no known_trip_count). NumPy's bits."""
    table, compiled = _small_triangle(monkeypatch, 11, backend)
    nested = [d for d in _rolled(compiled) if "rolled in the round before" in d.message]
    assert len(nested) >= 5, [d.message for d in _rolled(compiled)]
    inner = [i for c in compiled.optimized_hlo.computations if c is not
             compiled.optimized_hlo.entry for i in c.instructions if i.opcode == "while"]
    assert inner and all(known_trip_count(i) is None for i in inner)
    assert all(known_trip_count(i) is not None for i in _whiles(compiled))
    # (unnested, each (i, j) with 8 or more k trips is a loop of the entry: 153 of them)
    assert len(_whiles(compiled)) <= 60
    got = np.asarray(tk.device_get(compiled(table.copy())))
    np.testing.assert_array_equal(got, _triangle(table.copy()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_nests_corner_and_its_outer_loop_roll_too(backend, monkeypatch):
    """Near the diagonal the k loops run 2-7 trips, too few to roll alone; they roll where
    their body is exactly one a longer k loop rolled, so the j trips there are alike too, and
    then the i trips (a few hundred instructions each, repeating their own sketches inside:
    their period is found from one j loop to the next). Their bounds and trip counts are
    loop state, stepped apart from equal values: the whole nest is a few loops of the entry.
    NumPy's bits."""
    table, compiled = _small_triangle(monkeypatch, 13, backend)
    short = [d for d in _rolled(compiled) if "the body is exactly one rolled" in d.message]
    assert short, [d.message for d in _rolled(compiled)]
    # (before: each i's j loop a loop of the entry, and the corner's k trips unrolled)
    assert len(_whiles(compiled)) <= 4, len(_whiles(compiled))
    assert len(compiled.optimized_hlo.entry.instructions) < 400
    got = np.asarray(tk.device_get(compiled(table.copy())))
    np.testing.assert_array_equal(got, _triangle(table.copy()))


def test_a_nested_loops_trip_count_is_read_from_its_state_at_entry(monkeypatch):
    """An inner loop whose trip count varies has no known_trip_count, but its condition is
    ``counter < state[k]`` with ``state[k]`` passed on: ``counted_loop`` finds that, and the
    Python driver (and the GPU's device loop) run it that many trips reading two scalars once,
    not the predicate every trip. A loop whose bound moves, or whose counter steps by 2, is not
    counted."""
    from toolkit.ir.queries import counted_loop

    table, compiled = _small_triangle(monkeypatch, 12, "cpu")
    inner = [i for c in compiled.optimized_hlo.computations for i in c.instructions
             if i.opcode == "while" and known_trip_count(i) is None]
    assert inner and all(counted_loop(i) is not None for i in inner)
    monkeypatch.setenv("TOOLKIT_NATIVE_LOOP", "0")  # (the Python driver)
    python = _compiled(_triangle, table.copy())
    np.testing.assert_array_equal(python(table.copy()), _triangle(table.copy()))

    def moving_bound(x):
        return tk.lax.while_loop(lambda s: s[0] < s[1], lambda s: (s[0] + 1, s[1] - 1, s[2] * 2),
                                 (0, 9, x))[2]

    def by_two(x):
        return tk.lax.while_loop(lambda s: s[0] < s[1], lambda s: (s[0] + 2, s[1], s[2] * 2),
                                 (0, 9, x))[2]

    for fn, want in ((moving_bound, 2.0 ** 5), (by_two, 2.0 ** 5)):
        loops = [i for i in tk.jit(fn).lower(1.0).hlo.entry.instructions if i.opcode == "while"]
        assert [counted_loop(i) for i in loops] == [None]
        assert float(tk.jit(fn)(1.0)) == want


def test_a_list_built_trip_by_trip_is_found_no_loop_in_linear_time(monkeypatch):
    """``np.stack([f(x[:, j]) for j in ...])``: its trips are alike, but every trip's value is
    read at the end, so no loop rolls. That is found from each start at its first trip,
    before any other trip is compared: comparing every later trip from every start first
    made 1.5 million trip comparisons for 2,000 columns (10 s of compile)."""
    compared = []
    agrees = loop_rolling.trip_agrees
    monkeypatch.setattr(loop_rolling, "trip_agrees",
                        lambda *a: compared.append(a[3]) or agrees(*a))
    x = np.random.default_rng(0).standard_normal((8, 300))

    def columns(x):
        return np.stack([np.tanh(x[:, j]) + x[:, j].max() for j in range(x.shape[1])], axis=1)

    compiled = _compiled(columns, x)
    assert not _rolled(compiled) and len(compared) < 300, len(compared)
    np.testing.assert_allclose(compiled(x), columns(x), rtol=1e-13, atol=1e-15)
