"""Dots as one direct cuBLAS GEMM call, its layout decided at compile time.

A ``dot`` whose operands are row-major (batch..., m, k) and (batch..., k, n) matrices, either of
them stored transposed, with its batch dimensions leading on both sides, is one (strided
batched) GEMM: no transpose, reshape or cast per call, and a call the executor can record into
a CUDA graph. cuBLAS is column-major, so the row-major product C = A·B is computed as
Cᵀ = Bᵀ·Aᵀ: the operands swap places and a stored transpose becomes cuBLAS's transpose flag.
Other dots (integer, complex, mixed types, contracting over several dimensions) keep the
general library path."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...ir.nodes import Instruction

GEMM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class GemmSpec:
    dtype: np.dtype
    batch: int
    m: int
    n: int
    k: int
    lhs_transposed: bool  # the left operand is stored (k, m)
    rhs_transposed: bool  # the right operand is stored (n, k)

    @classmethod
    def from_dot(cls, inst: Instruction) -> GemmSpec | None:
        """The GEMM that computes ``inst``, or None where it is not one direct call."""
        lhs, rhs = inst.operands
        dtype = inst.shape.dtype.numpy
        if not (lhs.shape.dtype == rhs.shape.dtype == inst.shape.dtype) or dtype not in GEMM_DTYPES:
            return None
        a = inst.attrs
        lb, lc = list(a.get("lhs_batch_dims", ())), list(a.get("lhs_contracting_dims", ()))
        rb, rc = list(a.get("rhs_batch_dims", ())), list(a.get("rhs_contracting_dims", ()))
        nb = len(lb)
        if lb != list(range(nb)) or rb != list(range(nb)) or len(lc) != 1 or len(rc) != 1:
            return None
        lrank, rrank = lhs.shape.rank, rhs.shape.rank
        if lrank not in (nb + 1, nb + 2) or rrank not in (nb + 1, nb + 2):
            return None
        # the free dimension, if any, is the one that is not contracting
        if lrank == nb + 1:
            lhs_transposed = False
        elif lc == [nb + 1]:
            lhs_transposed = False
        elif lc == [nb]:
            lhs_transposed = True
        else:
            return None
        if rrank == nb + 1:
            rhs_transposed = False
        elif rc == [nb]:
            rhs_transposed = False
        elif rc == [nb + 1]:
            rhs_transposed = True
        else:
            return None
        ldims, rdims = lhs.shape.dims, rhs.shape.dims
        batch = math.prod(ldims[:nb])
        k = ldims[lc[0]]
        m = math.prod(d for i, d in enumerate(ldims) if i >= nb and i != lc[0])
        n = math.prod(d for i, d in enumerate(rdims) if i >= nb and i != rc[0])
        if 0 in (batch, m, n, k):  # nothing to multiply, or zeros to write: the library path
            return None
        return cls(np.dtype(dtype), batch, m, n, k, lhs_transposed, rhs_transposed)

    # ---- cuBLAS's column-major view of the row-major product --------------------------------
    def cublas_arguments(self) -> dict:
        """transa, transb, m, n, k, lda, ldb, ldc and the batch strides of Cᵀ = Bᵀ·Aᵀ."""
        return {
            "transa": 1 if self.rhs_transposed else 0,  # CUBLAS_OP_T = 1, CUBLAS_OP_N = 0
            "transb": 1 if self.lhs_transposed else 0,
            "m": self.n, "n": self.m, "k": self.k,
            "lda": self.k if self.rhs_transposed else self.n,
            "ldb": self.m if self.lhs_transposed else self.k,
            "ldc": self.n,
            "stride_a": self.k * self.n, "stride_b": self.m * self.k, "stride_c": self.m * self.n,
        }

    def host(self, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
        """The same product with NumPy, read from the same memory layout (the simulated
        device's cuBLAS)."""
        a = lhs.reshape(self.batch, self.k, self.m).transpose(0, 2, 1) if self.lhs_transposed \
            else lhs.reshape(self.batch, self.m, self.k)
        b = rhs.reshape(self.batch, self.n, self.k).transpose(0, 2, 1) if self.rhs_transposed \
            else rhs.reshape(self.batch, self.k, self.n)
        np.matmul(a, b, out=out.reshape(self.batch, self.m, self.n))

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k
