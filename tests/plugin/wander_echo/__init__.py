"""A third-party environment: say the word back."""

from service.envs.sdk import EnvConfig, Environment, Reset, Score, Transition

WORDS = ["apple", "river", "stone", "cloud", "ember"]


class Echo(Environment[EnvConfig]):
    name = "echo"
    version = "0.1.0"
    description = "Repeat the word you are given."
    kind = "single_turn"
    Config = EnvConfig
    reward_weights = {"exact": 1.0}

    def examples(self, config, split):
        return WORDS

    def reset(self, config, example, seed):
        return Reset(
            {"word": example, "said": None}, [{"role": "user", "content": f"Say: {example}"}]
        )

    def step(self, config, state, action, rng):
        return Transition({**state, "said": (action.get("content") or "").strip()}, [], True)

    def score(self, config, state):
        return Score({"exact": float(state["said"] == state["word"])}, {})
