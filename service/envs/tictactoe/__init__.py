"""Tic-tac-toe, the reference environment."""

from wander.service.envs.tictactoe.env import TicTacToe, TicTacToeConfig

__all__ = ["TicTacToe", "TicTacToeConfig"]
