"""Plots over profiles (matplotlib). Every function takes ``ax=None``, returns its artists and
never calls ``show()``."""
from .roofline import roofline
from .timeline import timeline

__all__ = ["roofline", "timeline"]
