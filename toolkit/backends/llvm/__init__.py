"""Target-neutral LLVM lowering shared by the CPU and GPU backends: element types, toolkit's
own vectorisable math, and the elemental emitter (the value of one output element)."""
