"""Tic-tac-toe, the reference environment, and its one-move variant."""

from wander.service.envs.tictactoe.env import TicTacToe, TicTacToeConfig
from wander.service.envs.tictactoe.move import TicTacToeMove, TicTacToeMoveConfig

__all__ = ["TicTacToe", "TicTacToeConfig", "TicTacToeMove", "TicTacToeMoveConfig"]
