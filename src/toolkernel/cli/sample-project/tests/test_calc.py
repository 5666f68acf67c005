import unittest

from calc import add, divide, evaluate, format_number


class CalcTest(unittest.TestCase):
    def test_add(self) -> None:
        self.assertEqual(add(2, 3), 5)

    def test_evaluate(self) -> None:
        self.assertEqual(evaluate("1 + 2 * 3"), 9)

    def test_divide(self) -> None:
        self.assertEqual(divide(6, 3), 2)

    def test_format(self) -> None:
        self.assertEqual(format_number(2.0), "2.0")


if __name__ == "__main__":
    unittest.main()
