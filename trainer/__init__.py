"""GRPO (TRL) and SFT training that drive the Wander service through ``client``.

The contract is docs/training.md; the recipe is the README's "Train a model".
"""
