"""Kernels whose LLVM IR is the same up to their names are compiled once.

``share_identical_kernels`` shares kernels whose HLO is the same up to names. Kernels of an
unrolled triangular loop differ in HLO (``d[:, i:] / (n - 1)`` has another extent every trip)
yet often emit the same code, because a kernel runs over [begin, end) of its outer dimension,
passed at run time: a rank-1 elementwise kernel never mentions its extent. LLVM spends
milliseconds on each such function (a five-instruction divide loop: 8 ms through O3 and
instruction selection), and a covariance filled column by column has 500 of them.

Here each kernel's function is compared, as text, with the kernels already emitted into the
same LLVM module (on the GPU, launched the same way). Within one module equal text is equal
code: the globals and the metadata it names (``!5``, a loop's vectoriser hints) are that
module's own, so nothing is shared on a coincidence of numbering across modules. A repeat is
removed before LLVM sees it and its name becomes an alias of the first, so its symbol still
resolves in the CPU's object, which the persistent cache keeps (a cache hit looks kernels up by
name without emitting them); the GPU's kernels name the entry they launch, and its PTX has no
aliases."""
from __future__ import annotations

from llvmlite import ir

_PLACEHOLDER = '"__toolkit_kernel_{}__"'


class SharedCode:
    """Per LLVM module: the text of each kernel emitted into it, and the aliases of repeats."""

    def __init__(self):
        self._first: dict[tuple, str] = {}
        self._aliases: dict[int, list[str]] = {}
        # each kept kernel's text (llvmlite prints a function anew each time it is asked)
        self._texts: dict[int, dict[str, str]] = {}
        self.shared = 0

    def share(self, module: ir.Module, names: list[str], context: tuple = ()) -> str | None:
        """``names``: the functions one kernel just added to ``module`` (the kernel first, then
        any entry of its own). If an earlier kernel of this module with the same ``context``
        (how it is launched) has the same code, remove these, alias them to that kernel's, and
        return its name; otherwise None."""
        functions = [module.globals[n] for n in names]
        own = [str(f) for f in functions]
        texts = own
        for k, name in enumerate(names):  # names by position: `@"x"` is how llvmlite writes them
            texts = [t.replace(f'@"{name}"', "@" + _PLACEHOLDER.format(k)) for t in texts]
        key = (id(module), context, tuple(texts))
        first = self._first.setdefault(key, names[0])
        if first == names[0]:
            self._texts.setdefault(id(module), {}).update(zip(names, own))
            return None
        originals = [first, *(n.replace(names[0], first, 1) for n in names[1:])]
        lines = self._aliases.setdefault(id(module), [])
        for name, original, function in zip(names, originals, functions, strict=True):
            del module.globals[name]
            lines.append(f'@"{name}" = alias {function.function_type}, {function.type} '
                         f'@"{original}"')
            _release(function)
        self.shared += 1
        return first

    def text(self, module: ir.Module, aliases: bool = True) -> str:
        """The module's LLVM IR, as ``str(module)`` writes it, with the aliases of its repeated
        kernels (``aliases``); the kept kernels' text is the one already made."""
        kept = self._texts.get(id(module), {})
        lines = [f'; ModuleID = "{module.name}"', f'target triple = "{module.triple}"',
                 f'target datalayout = "{module.data_layout}"', ""]
        lines += [t.get_declaration() for t in module.get_identified_types().values()]
        lines += [kept.get(name) or str(g) for name, g in module.globals.items()]
        lines += module._get_metadata_lines()  # noqa: SLF001 - llvmlite's own, as str() uses
        if aliases:
            lines += self._aliases.get(id(module), ())
        return "\n".join(lines) + "\n"


def _release(function: ir.Function) -> None:
    """Break the cycles of a removed function's IR (each block and argument names its parent,
    each instruction its block), so that it is freed now: thousands of repeats of a triangular
    loop's kernels otherwise waited, with everything they reach, for the collector's one pass
    after the compile."""
    for block in function.blocks:
        block.instructions.clear()
    function.blocks.clear()
    function.args = ()
