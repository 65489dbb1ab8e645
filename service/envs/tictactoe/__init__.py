"""Tic-tac-toe, the reference environment."""

from service.envs.tictactoe.env import TicTacToe, TicTacToeConfig

__all__ = ["TicTacToe", "TicTacToeConfig"]
