"""The IR: element types, shapes, the closed op table, immutable nodes, builder, HLO text
printer and parser, verifier. Imports nothing else of toolkit."""
from .builder import ComputationBuilder, ModuleBuilder
from .dtypes import ElementType
from .nodes import Computation, Instruction, Metadata, Module
from .ops import OPS
from .parser import HloParseError, parse_module
from .printer import module_to_text
from .shape_inference import ShapeError
from .shapes import Shape, TupleShape

__all__ = ["ComputationBuilder", "ModuleBuilder", "ElementType", "Computation", "Instruction",
           "Metadata", "Module", "OPS", "HloParseError", "parse_module", "module_to_text",
           "ShapeError", "Shape", "TupleShape"]
