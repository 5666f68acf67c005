"""Formatting answers."""


def format_number(value: float) -> str:
    return str(value)
