"""Notebook face: ``%load_ext toolkit`` registers the magics and rich displays."""
from __future__ import annotations


def load_ipython_extension(ipython) -> None:
    from .magics import XlaMagics

    ipython.register_magics(XlaMagics)


def unload_ipython_extension(ipython) -> None:  # IPython keeps registered magics; nothing to undo
    pass
