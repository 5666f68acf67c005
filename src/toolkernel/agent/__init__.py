"""The agent side: what a model says and calls. For now, the scripted turns the demo replays."""

from ._turns import DEMO_TURNS as DEMO_TURNS
from ._turns import Turn as Turn
