"""Dots as library calls: any dot_general becomes a (batched) matmul written into the
preallocated output buffer, by NumPy's BLAS on the CPU or CuPy's cuBLAS on the GPU (XLA calls
Eigen/oneDNN and cuBLAS the same way). ``xp`` is the array module: numpy or cupy."""
from __future__ import annotations

import math

import numpy as np

from ..ir.nodes import Instruction


def make_dot(inst: Instruction, xp=np):
    a = inst.attrs
    lhs, rhs = inst.operands
    lb, lc = list(a.get("lhs_batch_dims", ())), list(a.get("lhs_contracting_dims", ()))
    rb, rc = list(a.get("rhs_batch_dims", ())), list(a.get("rhs_contracting_dims", ()))
    lf = [d for d in range(lhs.shape.rank) if d not in lb + lc]
    rf = [d for d in range(rhs.shape.rank) if d not in rb + rc]
    batch = math.prod(lhs.shape.dims[d] for d in lb)
    m = math.prod(lhs.shape.dims[d] for d in lf)
    k = math.prod(lhs.shape.dims[d] for d in lc)
    n = math.prod(rhs.shape.dims[d] for d in rf)
    lperm, rperm = lb + lf + lc, rb + rc + rf
    ltrivial = lperm == list(range(len(lperm)))
    rtrivial = rperm == list(range(len(rperm)))
    dtype = inst.shape.dtype.numpy

    same_types = lhs.shape.dtype == rhs.shape.dtype == inst.shape.dtype
    if same_types and lhs.shape.rank == rhs.shape.rank == 2 and not lb and len(lc) == len(rc) == 1:
        # a plain matrix product (most dots): transposes as views, nothing reshaped per call
        transpose_lhs, transpose_rhs = lc == [0], rc == [1]

        def run_matrix(ins, out):
            x, y = ins
            xp.matmul(x.T if transpose_lhs else x, y.T if transpose_rhs else y, out=out)

        return run_matrix

    def run(ins, out):
        x, y = ins
        x3 = (x if ltrivial else xp.transpose(x, lperm)).reshape(batch, m, k)
        y3 = (y if rtrivial else xp.transpose(y, rperm)).reshape(batch, k, n)
        o3 = out.reshape(batch, m, n)
        if x3.dtype != dtype:
            x3, y3 = x3.astype(dtype), y3.astype(dtype)
        xp.matmul(x3, y3, out=o3)

    return run
