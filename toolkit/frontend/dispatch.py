"""Wires NumPy's protocols, Python operators and ndarray methods onto ``Tracer``."""
from __future__ import annotations

import operator

import numpy as np

from . import reductions, registry, views
from .error_handling import check_error_handling
from .errors import UndefinedResultError, UnsupportedNumpyError, UserOverflowError, UserValueError
from . import inplace
from .indexing import getitem, is_advanced, is_plain_key
from .planned_indexing import planned_getitem
from .masked import MaskedSelection, assign_selection, materialized
from .tracer import Tracer, numpy_scalar, strongly_typed, weakly_typed
from .ufuncs import apply_ufunc
from .python_arithmetic import (INT_ARITHMETIC, PYTHON_ERRORS, check_python_arithmetic,
                                python_bools_as_ints, python_numbers)
from . import flatiter, replay, run_by_numpy
from . import operator_fast_paths as fast

_CORE = set(vars(Tracer))  # what tracer.py defines; what follows is NumPy's face, replayable

_REDUCE_METHODS = {np.add: reductions.sum, np.multiply: reductions.prod,
                   np.maximum: reductions.max, np.minimum: reductions.min,
                   np.logical_and: reductions.all, np.logical_or: reductions.any}


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    if any(type(v) is MaskedSelection for v in inputs):
        return NotImplemented  # (x[mask]'s own: masked.py)
    out = kwargs.get("out")
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    if method == "__call__" and isinstance(out, Tracer) and ufunc.nout == 1:
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        where = kwargs.pop("where", True)
        casting = kwargs.get("casting", "same_kind")
        with out.trace.op_scope(ufunc.__name__):
            result = _array_ufunc(self, ufunc, method, *inputs, **kwargs)
            if where is not True:  # NumPy leaves out's other elements as they were
                result = registry.EXPORTS["where"](where, result, out)
            return inplace.store_result(out, result, f"np.{ufunc.__name__}(..., out=)", casting)
    if method == "__call__" and kwargs.get("where", True) is not True and out is None:
        raise UndefinedResultError(
            f"np.{ufunc.__name__}(..., where=) without out= leaves the other elements "
            "uninitialized in "
            "NumPy; pass out= (for example out=np.zeros_like(x)), or use np.where(mask, result, "
            "other)"
        )
    if method == "__call__":
        from .more_functions import GUFUNCS
        if ufunc in GUFUNCS:
            return GUFUNCS[ufunc](*inputs, **kwargs)
        if ufunc is np.matmul:
            return registry.EXPORTS["matmul"](*inputs, **kwargs)
        if ufunc is np.divmod:
            return (
                apply_ufunc(np.floor_divide, inputs, kwargs),
                apply_ufunc(np.remainder, inputs, kwargs),
            )
        return apply_ufunc(ufunc, inputs, kwargs)
    if method == "reduce" and ufunc in _REDUCE_METHODS:
        (x,) = inputs
        axis = kwargs.pop("axis", 0)
        return registry.EXPORTS[_REDUCE_METHODS[ufunc].__name__](x, axis=axis, **kwargs)
    if method == "accumulate":
        from .scans import ufunc_accumulate
        return ufunc_accumulate(ufunc, *inputs, **kwargs)
    if method == "outer":
        a, b = (strongly_typed(v) if isinstance(v, Tracer) else np.asarray(v) for v in inputs)
        outer = registry.EXPORTS["reshape"](a, tuple(a.shape) + (1,) * np.ndim(b))
        return apply_ufunc(ufunc, (outer, b), kwargs)
    if method == "at":
        from .indexing_functions import ufunc_at
        return ufunc_at(ufunc, *inputs, **kwargs)
    raise UnsupportedNumpyError(f"np.{ufunc.__name__}.{method} is not supported on traced arrays")


def _array_ufunc_or_numpy(self, ufunc, method, *inputs, **kwargs):
    """A ufunc (or one of its methods) traced; one toolkit has no rule for runs in NumPy at a
    graph break where the function may break (``run_by_numpy``)."""
    try:
        check_error_handling()
        result = _strong(_array_ufunc(self, ufunc, method, *inputs, **kwargs))
        # (NumPy's ufuncs return a 0-d result as a scalar, unless written into out=)
        return result if kwargs.get("out") is not None else _scalars(result)
    except UnsupportedNumpyError as error:
        name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        return run_by_numpy.run(getattr(ufunc, method), inputs, kwargs, name, error,
                                _first_clause(error))


def _numpy_name(func) -> str:
    module = (getattr(func, "__module__", "") or "").replace("numpy", "np", 1)
    # np.linalg.eig
    where = module if module.startswith("np.") and module.count(".") == 1 else "np"
    return f"{where}.{getattr(func, '__name__', func)}"


def _array_function(self, func, types, args, kwargs):
    impl = registry.FUNCTIONS.get(func)
    if impl is None:
        error = UnsupportedNumpyError(
            f"{_numpy_name(func)} is not supported on traced arrays by toolkit "
            f"({len(registry.FUNCTIONS)} NumPy functions are: "
            "toolkit.numpy.supported_functions() lists them, "
            "toolkit.numpy.supported_ufuncs() the ufuncs; the README says what is not supported "
            "and why)"
        )
        return run_by_numpy.run(func, args, kwargs, _numpy_name(func), error)
    # the wrapper registered for ``func`` itself (view tracking, fresh results), found by the
    # function, not its name: np.linalg.trace is not np.trace, and np.lib.stride_tricks'
    # sliding_window_view, a view, is no np.<name> (run as impl alone, its view missed later
    # writes to its parent)
    name = getattr(func, "__name__", "")
    public = registry.WRAPPERS.get(func)
    try:
        check_error_handling()
        result = (public or impl)(*args, **kwargs)
    except UnsupportedNumpyError as error:  # (an option toolkit has no rule for: mode="edge")
        return run_by_numpy.run(func, args, kwargs, _numpy_name(func), error,
                                _first_clause(error))
    if name in views.PYTHON_BOOL_FUNCTIONS and type(result) is Tracer:
        return weakly_typed(result)  # (a Python bool: returned as one, weak in arithmetic)
    result = _strong(result)
    return _scalars(result) if name in views.SCALAR_FUNCTIONS else result


def _strong(result):
    """NumPy's functions return arrays and NumPy scalars, never Python numbers: a result made
    from Python numbers alone (a weak tracer) is strongly typed from here on. ``np.maximum(n, 0)``
    is an ``np.int64``, which makes an int8 array int64 where ``n`` itself would not."""
    if type(result) is Tracer:
        return strongly_typed(result)
    if type(result) in (tuple, list):
        items = [_strong(r) for r in result]
        if any(a is not b for a, b in zip(items, result)):
            return type(result)(items)
    return result


def _scalars(result):
    """NumPy's 0-d results as NumPy scalars (a tuple's too: np.divmod, np.frexp)."""
    if type(result) is tuple:
        return tuple(numpy_scalar(r) for r in result)
    if isinstance(result, tuple) and hasattr(result, "_fields"):  # (SlogdetResult)
        return type(result)(*[numpy_scalar(r) for r in result])
    return numpy_scalar(result)


def _first_clause(error: Exception) -> str:
    """What an error said first (the break report's reason), short."""
    text = str(error.args[0]) if error.args else type(error).__name__
    return text.split("\n")[0].split("; ")[0][:160]


_NOT_RUN = object()


def _numpy_where_it_handles_errors(func, operands: tuple):
    """``func(*operands)`` run by NumPy where NumPy's error handling is on, else _NOT_RUN."""
    try:
        check_error_handling()
    except UnsupportedNumpyError as error:
        return run_by_numpy.run(func, operands, {}, f"np.{func.__name__}", error,
                                _first_clause(error))
    return _NOT_RUN


def _binary(ufunc, reflected=False):
    def op(self, other):
        if isinstance(other, (list, tuple)):
            if ufunc is np.multiply and not self.shape and (self.weak_type or self._scalar):
                # a Python int (or NumPy integer) times a list repeats the list, as in Python:
                # the count is a concrete value (a break, or an int specialised on); any other
                # number is Python's TypeError (a 0-d array multiplies elementwise)
                if self.dtype.kind in "iu":
                    return other * operator.index(self)
                kind = {"f": "float", "c": "complex", "b": "bool"}[self.dtype.kind]
                raise TypeError(f"can't multiply sequence by non-int of type "
                                f"'{kind if self.weak_type else 'numpy.' + str(self.dtype)}'")
            other = np.asarray(other)
        if not isinstance(other, (Tracer, np.ndarray, np.generic, bool, int, float, complex)):
            return NotImplemented  # (a MaskedSelection's reflected operator answers)
        operands = (other, self) if reflected else (self, other)
        if ufunc in INT_ARITHMETIC and python_numbers(operands):
            operands = python_bools_as_ints(operands)  # (True + True is 2 in Python)
        try:
            check_error_handling()
            # (what apply_ufunc makes of these, without resolving types again: a third of the
            # cost of tracing a Python loop's commonest operations, `a + b`, `a < b`, `x == 3`)
            if type(other) is Tracer and fast.same_type_arrays(self, other):
                out = fast.same_type_loop(ufunc, self.dtype)
                if out is not None:
                    return fast.of_same_type(ufunc, operands, out)
            if fast.exact_python_number(self, other):
                out = fast.same_type_loop(ufunc, self.dtype)
                if out is not None:
                    return fast.with_python_number(ufunc, self, other, reflected, out)
            if ufunc in PYTHON_ERRORS and python_numbers(operands):
                check_python_arithmetic(ufunc, *operands)
            result = apply_ufunc(ufunc, operands)
            # a NumPy scalar where an array or NumPy scalar took part (Python numbers alone
            # make a Python number: weakly typed)
            return result if result.weak_type else numpy_scalar(result)
        except UnsupportedNumpyError as error:  # (z < w of complex numbers: NumPy's own order)
            return run_by_numpy.run(ufunc, operands, {}, f"np.{ufunc.__name__}", error,
                                    _first_clause(error))
    return op


def _unary(ufunc):
    def op(self):
        ran = _numpy_where_it_handles_errors(ufunc, (self,))
        if ran is not _NOT_RUN:
            return ran
        if ufunc in INT_ARITHMETIC and python_numbers((self,)):
            (self,) = python_bools_as_ints((self,))  # (-True is -1 in Python)
        result = apply_ufunc(ufunc, (self,))
        return result if result.weak_type else numpy_scalar(result)
    return op


_OPERATORS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "lshift": np.left_shift, "rshift": np.right_shift,
}
def _inplace(ufunc, name):
    forward = _binary(ufunc)

    def op(self, other):
        if self.weak_type or self._scalar:  # a Python number or a NumPy scalar: immutable,
            return NotImplemented  # so ``s += 1`` rebinds ``s`` (Python falls back to s + 1)
        with self.trace.op_scope(ufunc.__name__):
            result = (_pow if name == "pow" else forward)(self, other)
            if result is NotImplemented:
                return result
            return inplace.store_result(self, result, f"x {_SYMBOLS[name]}= ...")
    return op


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
            "pow": "**", "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}
for _name, _ufunc in _OPERATORS.items():
    setattr(Tracer, f"__{_name}__", _binary(_ufunc))
    setattr(Tracer, f"__r{_name}__", _binary(_ufunc, reflected=True))
for _name, _ufunc in {"lt": np.less, "le": np.less_equal, "gt": np.greater,
                      "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}.items():
    setattr(Tracer, f"__{_name}__", _binary(_ufunc))
_power = Tracer.__pow__


def _pow(self, other):
    """``x ** n`` as ``ndarray.__pow__`` computes it: NumPy's fast path sends an exponent of
    exactly the Python int 2 to np.square (so ``bool_array ** 2`` is int8, not int64), and for
    float and complex arrays the Python int -1 to np.reciprocal and the Python float 0.5 to
    np.sqrt (``(-0.0) ** 0.5`` is -0.0, not pow's +0.0); an integer array to a negative Python
    int power is an error."""
    inexact = self.dtype.kind in "fc" and not self.weak_type
    if self._scalar and self.dtype.kind == "b":  # (NumPy's scalar math: np.True_ ** 2 is
        return _power(self, other)  # np.power(True, 2), int64; ndarray's square gives int8)
    if self._scalar and self.dtype.kind == "f" and type(other) is float and other == 0.5:
        # a NumPy float's ** calls pow, not ndarray's sqrt: pow(-0.0, 0.5) is +0.0 and
        # pow(-inf, 0.5) inf (elsewhere pow's and sqrt's correctly rounded roots agree)
        from . import lax

        root = apply_ufunc(np.add, (apply_ufunc(np.sqrt, (self,)), 0.0))
        minus_inf = apply_ufunc(np.equal, (self, -np.inf))
        return lax.select(minus_inf, lax.full_like(root, np.inf), root)
    if type(other) is int:
        if other == 2:
            return apply_ufunc(np.square, (self,))
        if other == -1 and inexact:
            return apply_ufunc(np.reciprocal, (self,))
        if self.dtype.kind == "c" and -100 < other < 100:
            from .complex_ufuncs import integer_power

            with self.trace.op_scope("power"):
                return integer_power(self, other)
        if other < 0 and self.dtype.kind in "biu" and not self.weak_type:
            # (NEP 50 meets the Python int first: out of the type's range, it is NumPy's
            # OverflowError before the negative exponent's ValueError)
            if self.dtype.kind == "u" or \
                    self.dtype.kind == "i" and other < np.iinfo(self.dtype).min:
                raise UserOverflowError(
                    f"Python integer {other} out of bounds for {self.dtype}")
            raise UserValueError("Integers to negative integer powers are not allowed.")
    if type(other) is float and other == 0.5 and inexact:
        return apply_ufunc(np.sqrt, (self,))
    return _power(self, other)


def _pow_scalar(self, other):
    ran = _numpy_where_it_handles_errors(operator.pow, (self, other))  # (ndarray.__pow__)
    if ran is not _NOT_RUN:
        return ran
    if python_numbers((self, other)):  # (True ** 2 is the int 1 in Python)
        self, other = python_bools_as_ints((self, other))
    result = _pow(self, other)
    if type(result) is Tracer and not result.weak_type:
        return numpy_scalar(result)
    return result


Tracer.__pow__ = _pow_scalar
for _name, _ufunc in _OPERATORS.items():
    setattr(Tracer, f"__i{_name}__", _inplace(_ufunc, _name))
Tracer.__neg__ = _unary(np.negative)
Tracer.__pos__ = _unary(np.positive)
Tracer.__abs__ = _unary(np.absolute)
Tracer.__invert__ = _unary(np.invert)


def _matmul(self, other):
    ran = _numpy_where_it_handles_errors(np.matmul, (self, other))
    return numpy_scalar(registry.EXPORTS["matmul"](self, other)) if ran is _NOT_RUN else ran


def _rmatmul(self, other):
    ran = _numpy_where_it_handles_errors(np.matmul, (other, self))
    return numpy_scalar(registry.EXPORTS["matmul"](other, self)) if ran is _NOT_RUN else ran


def _divmod(self, other):
    if python_numbers((self, other)):  # (divmod(7, 0) of Python numbers: ZeroDivisionError)
        check_python_arithmetic(np.floor_divide, self, other)
    ran = _numpy_where_it_handles_errors(np.divmod, (self, other))
    return _array_ufunc(self, np.divmod, "__call__", self, other) if ran is _NOT_RUN else ran




def _contains(self, value):
    """``value in x``: NumPy's ``(x == value).any()`` (Python makes it a bool: a break)."""
    return registry.EXPORTS["any"](apply_ufunc(np.equal, (self, value)))


Tracer.__contains__ = _contains
Tracer.__matmul__ = _matmul
Tracer.__rmatmul__ = _rmatmul
Tracer.__divmod__ = _divmod
Tracer.__array_ufunc__ = _array_ufunc_or_numpy
Tracer.__array_function__ = _array_function


def _without_selections(key):
    """An index with each ``x[mask]`` in it as NumPy's array (an index needs its length)."""
    if isinstance(key, MaskedSelection):
        return key.materialize()
    if type(key) is tuple and any(isinstance(k, MaskedSelection) for k in key):
        return materialized(key)
    return key


def _getitem(self, key):
    result = planned_getitem(self, key)  # (a Python loop's ``a[i, j]``: shapes planned once)
    if result is not None:
        return result
    with self.trace.op_scope("getitem"):
        key = _without_selections(key)
        trace = self._trace
        if isinstance(key, Tracer) and key.dtype == np.bool_ and key.shape == self.shape \
                and self.ndim and trace.tape is None and trace._tape_in_op is None:
            # x[mask]: dense until its length is needed (masked.py). (A call that records or
            # replays its operations reads it as before: a break guarded by the count.)
            return MaskedSelection.taken(self, key)
        if not is_plain_key(key) and is_advanced(key):  # a copy in NumPy, never a view
            return numpy_scalar(getitem(self, key))
        result = getitem(self, key)
        if not result.shape and not _has_ellipsis(key):  # x[i, j]: a NumPy scalar, not a view
            return numpy_scalar(result)
        return views.view_of(self, key, result)


def _has_ellipsis(key) -> bool:
    return key is Ellipsis or type(key) is tuple and any(k is Ellipsis for k in key)


def _setitem(self, key, value):
    if self._scalar:
        raise TypeError(f"'numpy.{self.dtype.type.__name__}' object does not support item "
                        "assignment")
    with self.trace.op_scope("setitem"):
        key = _without_selections(key)
        if isinstance(value, MaskedSelection):
            if assign_selection(self, key, value):
                return
            value = value.materialize()
        inplace.assign(self, key, value)


def _fill(self, value):
    with self.trace.op_scope("fill"):
        inplace.assign(self, Ellipsis, value)


def _round(self, ndigits=None):
    """Python's round() of a NumPy scalar (NumPy arrays do not define it): with ndigits a NumPy
    scalar, np.round's; without, a Python int (a graph break, as int() is)."""
    if self.weak_type and not self.shape and not self._scalar:  # (a Python number: Python's
        # round of its value, a break as int() is)
        value = complex(self) if self.dtype.kind == "c" else \
            float(self) if self.dtype.kind == "f" else int(self)
        return round(value) if ndigits is None else round(value, ndigits)
    if not self._scalar:
        raise TypeError("type numpy.ndarray doesn't define __round__ method")
    rounded = numpy_scalar(registry.EXPORTS["round"](self, 0 if ndigits is None else ndigits))
    return rounded if ndigits is not None else int(rounded)


Tracer.__round__ = _round
Tracer.flat = property(flatiter.get_flat, flatiter.set_flat, None, "NumPy's x.flat")
Tracer.__getitem__ = _getitem
Tracer.__setitem__ = _setitem
Tracer.fill = _fill


def _method(name):
    def method(self, *args, **kwargs):  # looked up per call: the families register after this
        try:
            check_error_handling()
            result = registry.EXPORTS[name](self, *args, **kwargs)
            # a NumPy scalar's methods return scalars too (s.astype(np.float32))
            return numpy_scalar(result) if name in views.SCALAR_FUNCTIONS or self._scalar \
                else result
        except UnsupportedNumpyError as error:  # (x.max() of complex numbers: NumPy's order)
            return run_by_numpy.run(getattr(np.ndarray, name), (self,) + args, kwargs,
                                    f"x.{name}", error, _first_clause(error))

    method.__name__ = name
    return method


for _name in ("sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "all",
              "any", "ravel", "squeeze", "swapaxes", "clip", "dot", "copy", "astype", "argsort",
              "argpartition", "cumsum", "cumprod", "choose", "conj", "conjugate", "diagonal",
              # not .trace(): Tracer.trace is the trace
              "nonzero", "repeat", "round", "searchsorted", "take"):
    setattr(Tracer, _name, _method(_name))


def _conjugate_method(name):
    complex_conjugate = _method(name)

    def method(self, *args, **kwargs):
        # ndarray.conj of a real array is the array itself (no ufunc: a bool array stays bool,
        # where np.conjugate gives int8; and it is the same object, so writes show in both)
        if self.dtype.kind != "c" and not args and not kwargs:
            return self
        return complex_conjugate(self, *args, **kwargs)

    method.__name__ = name
    return method


Tracer.conj, Tracer.conjugate = _conjugate_method("conj"), _conjugate_method("conjugate")


def _sort_in_place(self, axis=-1, kind=None, order=None, *, stable=None):
    """ndarray.sort sorts in place (and returns None), as ndarray.partition partitions."""
    with self.trace.op_scope("sort"):
        inplace.store_result(self, registry.EXPORTS["sort"](self, axis, kind, order), "x.sort()")


def _partition_in_place(self, kth, axis=-1, kind="introselect", order=None):
    with self.trace.op_scope("partition"):
        inplace.store_result(self, registry.EXPORTS["partition"](self, kth, axis, kind, order),
                             "x.partition()")


def _put(self, indices, values, mode="raise"):
    registry.EXPORTS["put"](self, indices, values, mode)


def _view(self, dtype=None, type=None):
    if type is not None or dtype is None:
        raise UnsupportedNumpyError(
            "x.view(type=...) is not supported on traced arrays; x.view(dtype) is"
        )
    dtype = np.dtype(dtype)
    if dtype.itemsize != self.dtype.itemsize or dtype == np.bool_ or self.dtype == np.bool_:
        raise UnsupportedNumpyError(
            f"x.view({dtype}) of {self.describe()}: only a view as another type of the "
            "same width is supported on traced arrays"
        )
    from . import lax
    result = self if dtype == self.dtype else lax.bitcast_convert(self, dtype)
    if result is self:
        return result
    # (reads follow later writes into ``self``, as NumPy's view does; writes through it are
    # refused)
    how = views.DerivedView(lambda parent: lax.bitcast_convert(parent, dtype),
                            ("view", dtype.str), "view", lambda array: array.view(dtype))
    return views.mark_untracked_view(result, self, "view", how)


def _resize(self, *args, **kwargs):
    raise UnsupportedNumpyError(
        "x.resize() changes the array's size in place, which a traced array cannot; "
        "use x = np.resize(x, shape)"
    )


Tracer.compress = lambda self, condition, axis=None, out=None: registry.EXPORTS["compress"](
    condition, self, axis, out)
Tracer.sort = _sort_in_place
Tracer.partition = _partition_in_place
Tracer.put = _put
Tracer.view = _view
Tracer.resize = _resize
Tracer.real = property(lambda self: registry.EXPORTS["real"](self))
Tracer.imag = property(lambda self: registry.EXPORTS["imag"](self))
Tracer.itemsize = property(lambda self: self.dtype.itemsize)
Tracer.nbytes = property(lambda self: self.size * self.dtype.itemsize)


def _reshape(self, *shape, order="C"):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return registry.EXPORTS["reshape"](self, shape, order)


def _transpose(self, *axes):
    if (
        len(axes) == 1
        and isinstance(axes[0], (tuple, list))
        or (len(axes) == 1 and axes[0] is None)
    ):
        axes = axes[0]
    return registry.EXPORTS["transpose"](self, axes or None)


Tracer.reshape = _reshape
Tracer.transpose = _transpose
Tracer.T = property(lambda self: registry.EXPORTS["transpose"](self))
Tracer.mT = property(lambda self: registry.EXPORTS["swapaxes"](self, -1, -2))
def _flatten(self, order="C"):
    """ndarray.flatten: always a copy (ravel may view), free to write into; Fortran order
    reads the transpose in C order."""
    if order == "F" or (order in ("A", "K") and self.ndim <= 1):
        return registry.EXPORTS["copy"](registry.EXPORTS["ravel"](self.T))
    return registry.EXPORTS["copy"](registry.EXPORTS["ravel"](self, order))


Tracer.flatten = _flatten

# every operation attached above is recorded and replayed by a function that breaks its graph
# (frontend.replay); of tracer.py's own, only the in-place reshape ``a.shape = ...`` is one
replay.instrument(Tracer, [name for name in vars(Tracer) if name not in _CORE])
Tracer.shape = property(Tracer.shape.fget, replay.replayable_method(Tracer.shape.fset), None,
                        Tracer.shape.__doc__)

__all__: list[str] = []  # importing this module attaches the protocols to Tracer
