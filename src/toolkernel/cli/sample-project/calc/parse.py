"""Tokenize and evaluate expressions like ``1 + 2 * 3`` (left to right, no precedence)."""

from .ops import add, divide, multiply, subtract

OPERATORS = {"+": add, "-": subtract, "*": multiply, "/": divide}


def tokenize(text: str) -> list[str]:
    return text.split()


def evaluate(text: str) -> float:
    tokens = tokenize(text)
    value = float(tokens[0])
    for operator, operand in zip(tokens[1::2], tokens[2::2], strict=True):
        value = OPERATORS[operator](value, float(operand))
    return value
