"""A tiny calculator: parse an expression, evaluate it, format the answer."""

from .format import format_number
from .ops import add, divide, multiply, subtract
from .parse import evaluate, tokenize

__all__ = ["add", "divide", "evaluate", "format_number", "multiply", "subtract", "tokenize"]
