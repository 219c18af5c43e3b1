"""Vector variants of math-library calls, by the x86-64 vector function ABI (glibc's libmvec:
``_ZGVeN8v_sin`` is sin on 8 doubles in a zmm register).

A scalar call such as ``sin(x)`` in a kernel's element code blocks the loop vectoriser, or
leaves it calling the scalar function once per lane. Declared without side effects (``errno``
is not read by NumPy, nor here) and carrying the ``vector-function-abi-variant`` attribute, the
call is widened by LLVM's loop vectoriser into calls of the library's vector variant, the way
clang's ``-fveclib=libmvec`` does. The variants offered are only those the host's registers
can pass and the library defines; ``llvm.compiler.used`` keeps their declarations alive until
the vectoriser has run."""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir
from llvmlite.ir.values import FunctionAttributes

from .types import I8

MAPPING_ATTRIBUTE = "vector-function-abi-variant"
_USED = "llvm.compiler.used"


@dataclass(frozen=True)
class VectorMath:
    # (ABI letter, register bits): ("b", 128), ("d", 256), ("e", 512)
    isas: tuple[tuple[str, int], ...]
    functions: frozenset[str]  # the library's vector symbols (``_ZGVdN4v_sin``, ...)
    library: str = "libmvec"

    def covers(self, stem: str, single: bool, arguments: int = 1) -> bool:
        """Has the library ``stem`` (``sin``) for float32 (``single``) or float64? Then a libm
        call beats LLVM's intrinsic, which the vectoriser widens only to call the scalar
        function lane by lane."""
        return bool(self.variants(stem + ("f" if single else ""), 32 if single else 64, arguments))

    def variants(self, name: str, element_bits: int, arguments: int) -> list[tuple[str, int]]:
        """(vector symbol, lanes) of ``name`` the host can call."""
        found = []
        for letter, bits in self.isas:
            lanes = bits // element_bits
            symbol = f"_ZGV{letter}N{lanes}{'v' * arguments}_{name}"
            if symbol in self.functions:
                found.append((symbol, lanes))
        return found


class _DeclarationAttributes(FunctionAttributes):
    """llvmlite's attribute set, plus the memory effect and string attributes it does not list."""
    _extra = ("willreturn", "memory(none)")

    def add(self, name):
        if name in self._extra or name.startswith('"'):
            return set.add(self, name)
        return super().add(name)


def declare_vectorizable(
    module: ir.Module, vector_math: VectorMath, name: str, fn_type: ir.FunctionType
) -> ir.Function:
    """``name`` (a libm function) declared pure, with its vector variants offered to the loop
    vectoriser; a plain declaration where the library has none."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    fn = ir.Function(module, fn_type, name)
    element = fn_type.return_type
    variants = vector_math.variants(
        name, 32 if isinstance(element, ir.FloatType) else 64, len(fn_type.args)
    )
    if not variants:
        return fn
    fn.attributes = _DeclarationAttributes()
    for attribute in ("nounwind", "willreturn", "memory(none)"):
        fn.attributes.add(attribute)
    mappings = []
    for symbol, lanes in variants:
        vector = ir.VectorType(element, lanes)
        if symbol not in module.globals:
            ir.Function(module, ir.FunctionType(vector, [vector] * len(fn_type.args)), symbol)
        mappings.append(f"_ZGV_LLVM_N{lanes}{'v' * len(fn_type.args)}_{name}({symbol})")
    fn.attributes.add(f'"{MAPPING_ATTRIBUTE}"="{",".join(mappings)}"')
    return fn


def keep_vector_variants(module: ir.Module) -> None:
    """List the module's vector-variant declarations in ``llvm.compiler.used`` (once, after
    every kernel is emitted), so that dead-code elimination keeps them for the vectoriser."""
    symbols = [
        g
        for name, g in module.globals.items()
        if name.startswith("_ZGV") and isinstance(g, ir.Function)
    ]
    if not symbols or _USED in module.globals:
        return
    pointer = I8.as_pointer()
    array = ir.ArrayType(pointer, len(symbols))
    used = ir.GlobalVariable(module, array, _USED)
    used.linkage = "appending"
    used.section = "llvm.metadata"
    used.initializer = ir.Constant(array, [fn.bitcast(pointer) for fn in symbols])
