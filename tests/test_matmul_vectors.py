"""matmul with a vector operand and no batch dimensions traces to one dot of the vector
itself, as JAX's HLO has it (f64[m,k] . f64[k] -> f64[m]), not to reshapes to a matrix and
back; each form against NumPy on every backend, for every float and integer dtype."""
import numpy as np
import pytest

import toolkit as tk
from toolkit.frontend.errors import ShapeMismatchError

FORMS = {  # name: (operand shapes, the dot line's shapes and contracting dimensions)
    "vector @ vector": ([(5,), (5,)], "f64[] dot(", "lhs_contracting_dims={0}, "
                        "rhs_contracting_dims={0}"),
    "matrix @ vector": ([(3, 5), (5,)], "f64[3]{0} dot(", "lhs_contracting_dims={1}, "
                        "rhs_contracting_dims={0}"),
    "vector @ matrix": ([(5,), (5, 4)], "f64[4]{0} dot(", "lhs_contracting_dims={0}, "
                        "rhs_contracting_dims={0}"),
}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_the_hlo_is_one_dot_of_the_vector(name):
    shapes, head, dims = FORMS[name]
    args = [np.ones(s) for s in shapes]
    text = tk.jit(lambda a, b: a @ b).lower(*args).as_text(metadata=False)
    (line,) = [x for x in text.splitlines() if " dot(" in x]
    assert head in line and dims in line, line
    assert "reshape" not in text


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "gpu-simulated"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.complex64])
@pytest.mark.parametrize("name", sorted(FORMS))
def test_each_form_is_numpys(name, dtype, backend):
    shapes, _, _ = FORMS[name]
    rng = np.random.default_rng(sorted(FORMS).index(name))
    args = [(rng.standard_normal(s) * 4).astype(dtype) for s in shapes]
    want = args[0] @ args[1]
    got = np.asarray(tk.jit(lambda a, b: a @ b, backend=backend)(*args))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype in (np.float32, np.complex64)
                               else 1e-12)


def test_a_vector_of_the_wrong_length_names_both_shapes():
    with pytest.raises(ShapeMismatchError, match=r"matmul: contracting dimensions differ.*"
                                                  r"\(5 != 4\)"):
        tk.jit(lambda a, b: a @ b)(np.ones((3, 5)), np.ones(4))


def test_a_zero_length_contraction_is_zero():
    a, b = np.ones((3, 0)), np.ones(0)
    got = tk.jit(lambda a, b: a @ b, backend="cpu")(a, b)
    assert np.array_equal(got, a @ b) and got.shape == (3,)
