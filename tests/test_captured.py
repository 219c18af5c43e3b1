"""Data a jitted function reads from outside its arguments is read as NumPy reads it: on every
call (frontend/captured.py). Arrays in globals, closures, attributes, dicts and lists are
lifted into parameters, so a rebinding or an in-place change between calls is seen with no new
trace; numbers are constants guarded before every call, so a new value traces again and the
recompile report names it. Each case would give the first call's numbers forever if the value
were a constant of the program, as it was before (and is under jax.jit)."""
import warnings

import numpy as np
import pytest

import toolkit as tk

BACKENDS = ["interpreter", "cpu"]
W = np.ones(3)
LR = 0.5
COUNTER = 0


def _global_reader(x):
    return x * W * LR


class Model:
    def __init__(self):
        self.w = np.full(3, 2.0)
        self.params = {"b": np.zeros(3)}
        self.layers = [np.ones(3), np.full(3, 3.0)]

    def forward(self, x):
        for layer in self.layers:
            x = x * layer
        return x * self.w + self.params["b"]


@pytest.fixture(autouse=True)
def _restore_globals():
    global W, LR, COUNTER
    yield
    W, LR, COUNTER = np.ones(3), 0.5, 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_array_rebound_or_written_in_place_is_seen_without_a_new_trace(backend):
    global W
    f = tk.jit(_global_reader, backend=backend)
    x = np.arange(3.0)
    before = len(f.compiles)  # (the history of _global_reader is kept across tk.jit wrappers)
    np.testing.assert_array_equal(f(x), _global_reader(x))
    W = np.full(3, 5.0)
    np.testing.assert_array_equal(f(x), _global_reader(x))
    W[1] = -7.0
    np.testing.assert_array_equal(f(x), _global_reader(x))
    W *= 2
    np.testing.assert_array_equal(f(x), _global_reader(x))
    assert len(f.compiles) - before == 1  # one program: W is its parameter, read on every call


@pytest.mark.parametrize("backend", BACKENDS)
def test_attributes_dict_and_list_items_are_read_on_every_call(backend):
    m = Model()
    f = tk.jit(m.forward, backend=backend)
    before = len(f.compiles)
    x = np.array([1.0, -2.0, 0.5])
    np.testing.assert_array_equal(f(x), m.forward(x))
    m.w = np.full(3, -1.0)
    m.params["b"][:] = 4.0
    m.layers[1] = np.full(3, 0.25)
    m.layers[0] *= 3
    np.testing.assert_array_equal(f(x), m.forward(x))
    assert len(f.compiles) - before == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_closure_array_is_read_on_every_call(backend):
    def make():
        table = np.arange(4.0)

        def lookup(x):
            return x + table

        return lookup, table

    lookup, table = make()
    f = tk.jit(lookup, backend=backend)
    x = np.ones(4)
    np.testing.assert_array_equal(f(x), lookup(x))
    table[:] = [10.0, 20.0, 30.0, 40.0]
    np.testing.assert_array_equal(f(x), [11.0, 21.0, 31.0, 41.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_changed_number_traces_again_and_the_report_names_it(backend):
    global LR
    f = tk.jit(_global_reader, backend=backend)
    x = np.arange(3.0)
    before = len(f.compiles)
    f(x)
    LR = 0.125
    np.testing.assert_array_equal(f(x), _global_reader(x))
    LR = -0.0  # the sign of zero is a different constant
    np.testing.assert_array_equal(f(x), _global_reader(x))
    assert np.signbit(f(np.ones(3)))[0]
    assert len(f.compiles) - before == 3
    report = str(f.explain_recompiles())
    assert "CAPTURED_VALUE" in report and "'LR' is now 0.125, was 0.5" in report
    assert "pass 'LR' as an argument" in report


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_array_of_a_new_shape_traces_again(backend):
    global W
    f = tk.jit(lambda x: x.sum() * W, backend=backend)
    x = np.ones(2)
    np.testing.assert_array_equal(f(x), 2.0 * W)
    W = np.arange(5.0)
    np.testing.assert_array_equal(f(x), 2.0 * W)
    assert "'W' is now an array float64[5], was an array float64[3]" in str(f.explain_recompiles())


def test_one_array_read_by_two_names_stays_one_until_they_part():
    holder = {"a": np.ones(2)}
    holder["b"] = holder["a"]

    def both(x):
        return x * holder["a"] + holder["b"]

    f = tk.jit(both)
    x = np.full(2, 3.0)
    np.testing.assert_array_equal(f(x), both(x))
    holder["b"] = np.full(2, 10.0)  # now two arrays: traced again, as two parameters
    np.testing.assert_array_equal(f(x), both(x))
    assert len(f.compiles) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_into_a_captured_array_reaches_it_on_every_call(backend):
    acc = np.zeros(3)

    def accumulate(x):
        acc[...] += x
        return acc.sum()

    f = tk.jit(accumulate, backend=backend)
    for k in range(3):
        assert f(np.ones(3)) == 3.0 * (k + 1)
    np.testing.assert_array_equal(acc, [3.0, 3.0, 3.0])


def test_a_name_the_function_stores_is_python_state_not_a_guard():
    def counted(x):
        global COUNTER
        COUNTER += 1
        return x + 1

    f = tk.jit(counted, fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "runs only when traced"
        for _ in range(3):
            f(np.ones(2))
    assert len(f.compiles) == 1


def test_memory_level_uses_get_the_captured_array():
    def viewed(x):
        v = np.ndarray((2,), np.float64, buffer=W, offset=8)
        return x + v

    np.testing.assert_array_equal(tk.jit(viewed)(np.zeros(2)), viewed(np.zeros(2)))


def test_the_lifted_array_is_a_named_parameter_of_the_hlo():
    text = tk.jit(_global_reader).lower(np.ones(3)).as_text()
    assert "W.3 = f64[3]{0} parameter(1)" in text.replace("%", "")
    assert "constant(0.5)" in text


def test_a_compiled_program_takes_the_callers_arguments_only():
    compiled = tk.jit(_global_reader).lower(np.ones(3)).compile()
    np.testing.assert_array_equal(compiled(np.ones(3)), _global_reader(np.ones(3)))
    with pytest.raises(Exception, match="takes 1 array argument"):
        compiled(np.ones(3), np.ones(3))


def test_a_function_that_breaks_reads_captured_arrays_too():
    global W

    def breaks(x):
        if x.sum() > 0:  # a graph break
            return x * W
        return x - W

    f = tk.jit(breaks)
    x = np.ones(3)
    np.testing.assert_array_equal(f(x), breaks(x))
    W = np.full(3, 9.0)
    np.testing.assert_array_equal(f(x), breaks(x))
    W[0] = 0.0
    np.testing.assert_array_equal(f(-x), breaks(-x))


def test_on_a_device_backend_a_captured_array_is_uploaded_on_every_call_and_seen():
    """A host array read from outside is a parameter on the GPU too: uploaded with the call's
    arguments (the profile shows the copy), so an in-place change is seen, as in NumPy."""
    from toolkit.backends import Backend, register_backend
    from toolkit.backends.gpu import compile_module
    from simulated_gpu import SimulatedDevice

    global W
    device = SimulatedDevice()
    register_backend(Backend("gpu-captured-sim", "a simulated device (tests)", -1,
                             lambda module: compile_module(module, device=device)))
    f = tk.jit(_global_reader, backend="gpu-captured-sim")
    x = np.arange(3.0)
    before = len(f.compiles)
    np.testing.assert_array_equal(np.asarray(f(x)), _global_reader(x))
    uploads = len(device.uploads)
    W[0] = 9.0
    np.testing.assert_array_equal(np.asarray(f(x)), _global_reader(x))
    assert len(device.uploads) - uploads == 2  # x and W
    W = np.full(3, 4.0)
    np.testing.assert_array_equal(np.asarray(f(x)), _global_reader(x))
    assert len(f.compiles) - before == 1


@tk.jit
def _inner_jitted(x):
    return x * W


def test_a_jitted_function_called_inside_another_reads_its_globals_on_every_call():
    f = tk.jit(lambda x: _inner_jitted(x) + 1.0)
    x = np.ones(3)
    np.testing.assert_array_equal(f(x), x * W + 1.0)
    W[:] = 5.0
    np.testing.assert_array_equal(f(x), x * W + 1.0)


def test_a_compiled_program_whose_captured_array_changed_shape_says_so():
    global W
    compiled = tk.jit(_global_reader).lower(np.ones(3)).compile()
    W = np.ones(4)
    with pytest.raises(ValueError, match="'W' is now an array float64\\[4\\].*compile it again"):
        compiled(np.ones(3))


SIZES = np.array([3, 5])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_small_integer_array_is_configuration_constant_and_guarded_by_value(backend):
    def padded(x):
        out = np.zeros(SIZES[1])  # a shape from it: static, as in NumPy, with fullgraph too
        out[:SIZES[0]] = x
        return out

    f = tk.jit(padded, backend=backend, fullgraph=True)
    x = np.arange(3.0)
    np.testing.assert_array_equal(f(x), padded(x))
    SIZES[1] = 7  # a change of value traces again
    np.testing.assert_array_equal(f(x), padded(x))
    assert "'SIZES' is now int64[2] [3, 7], was int64[2] [3, 5]" in str(f.explain_recompiles())
    SIZES[1] = 5


def test_an_array_reached_but_never_used_is_not_read_and_traces_nothing_when_it_changes():
    params = {"a": np.ones(3), "b": np.ones(4)}

    def scaled(x):
        return x * params["a"]

    f = tk.jit(scaled)
    x = np.arange(3.0)
    before = len(f.compiles)
    np.testing.assert_array_equal(f(x), scaled(x))
    params["b"] = np.ones(7)  # reached (an item of the dict the code reads), never used
    params["a"][:] = 2.0
    np.testing.assert_array_equal(f(x), scaled(x))
    assert len(f.compiles) - before == 1


def test_a_captured_device_array_is_a_parameter_too():
    from toolkit.backends import Backend, register_backend
    from toolkit.backends.gpu import compile_module, device_put
    from simulated_gpu import SimulatedDevice

    device = SimulatedDevice()
    register_backend(Backend("gpu-captured-device-array", "a simulated device (tests)", -1,
                             lambda module: compile_module(module, device=device)))
    held = {"w": device_put(np.ones(3), device)}

    def scaled(x):
        return x * held["w"]

    f = tk.jit(scaled, backend="gpu-captured-device-array")
    x = np.arange(3.0)
    np.testing.assert_array_equal(np.asarray(f(x)), x)
    held["w"] = device_put(np.full(3, 5.0), device)  # rebound: read on the next call
    uploads = len(device.uploads)
    np.testing.assert_array_equal(np.asarray(f(x)), x * 5.0)
    assert len(device.uploads) - uploads == 1  # x alone: the device array is passed as it is
