"""GRPO (TRL) and SFT training that drive the Wander service through ``client`` (DESIGN §7)."""
