"""Float promotions by NumPy scalars (NEP 50) are reported: the line, what it turned wider
(dots and other operations), and the fix; in the profile, its summary, the dashboard and a
warning. NumPy's dtypes are still the result: toolkit computes what NumPy computes."""
import warnings

import numpy as np
import pytest

import toolkit as tk
from toolkit.widgets.report import report_html


def attention(q, k, v):
    scores = q @ k.T / np.sqrt(q.shape[1])  # np.sqrt of an int: a NumPy float64 scalar
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ v @ v.T


def fixed(q, k, v):
    scores = q @ k.T / float(np.sqrt(q.shape[1]))
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ v @ v.T


ARGS = [np.random.default_rng(k).standard_normal((6, 4)).astype(np.float32) for k in range(3)]


def test_a_numpy_scalar_promotion_is_reported_with_its_line_and_cost():
    f = tk.jit(attention, backend="interpreter")
    with tk.profile() as prof, pytest.warns(tk.PromotionWarning) as caught:
        out = f(*ARGS)
    assert out.dtype == attention(*ARGS).dtype == np.float64  # NumPy's result, all the same
    (event,) = prof.promotions
    assert event.function == "attention" and event.location.endswith(
        f"test_promotions.py:{attention.__code__.co_firstlineno + 1}")
    assert event.what == "np.divide with the NumPy scalar np.float64(2.0)"
    assert (event.from_dtype, event.to_dtype) == ("float32", "float64")
    assert (event.dots, event.total_dots) == (2, 3)  # @ v and @ v.T; not q @ k.T, before it
    assert event.operations >= 5
    assert "Fix: wrap the scalar in float(...)" in str(caught[0].message)
    assert "float promotions by NumPy scalars: 1" in prof.summary()
    html = report_html(prof)
    assert "float promotions by NumPy scalars" in html and "2 of 3" in html


def test_python_floats_and_the_fix_report_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error", tk.PromotionWarning)
        with tk.profile() as prof:
            out = tk.jit(fixed, backend="interpreter")(*ARGS)
            tk.jit(lambda x: x * 2.5 + np.float32(1), backend="interpreter")(ARGS[0])
            tk.jit(lambda x: x * np.float64(2.5), backend="interpreter")(ARGS[0].astype(np.float64))
    assert out.dtype == np.float32 and not prof.promotions


def test_the_profile_keeps_promotions_when_saved(tmp_path):
    with tk.profile() as prof, pytest.warns(tk.PromotionWarning):
        tk.jit(lambda x: np.tanh(x * np.float64(0.5)), backend="interpreter")(ARGS[0])
    prof.save(tmp_path / "p.json")
    (event,) = tk.Profile.load(tmp_path / "p.json").promotions
    assert event.what == "np.multiply with the NumPy scalar np.float64(0.5)"
    assert (event.dots, event.operations) == (0, 2)
