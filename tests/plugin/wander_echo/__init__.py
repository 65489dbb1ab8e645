"""A third-party environment: say the word back."""

from wander.sdk import EnvConfig, Environment, Reset, Score, Transition

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


class Digits(Environment[EnvConfig]):
    """Two turns; the reward is the share of digits in the answers, counted as if they
    held one more digit and one more other character: graded, so that even an untrained
    model's samples differ, also where none of them holds a digit (their lengths differ),
    which is what a GRPO plumbing test needs (with the plain share, the groups of a batch
    now and then all scored 0, the step learnt nothing, and a test of its effect failed)."""

    name = "digits"
    version = "0.1.0"
    description = "Answer with digits, twice."
    kind = "multi_turn"
    Config = EnvConfig
    reward_weights = {"digits": 1.0}

    def examples(self, config, split):
        return list(range(100))

    def reset(self, config, example, seed):
        return Reset({"said": []}, [{"role": "user", "content": f"Write digits ({example})."}])

    def step(self, config, state, action, rng):
        said = [*state["said"], action.get("content") or ""]
        if len(said) == 1:
            return Transition({"said": said}, [{"role": "user", "content": "Once more."}], False)
        return Transition({"said": said}, [], True)

    def score(self, config, state):
        text = "".join(state["said"])
        return Score({"digits": (sum(c.isdigit() for c in text) + 1) / (len(text) + 2)}, {})


class Faulty(Environment[EnvConfig]):
    """Raises where it is told to: ``reset`` on the example "reset", ``step`` on the
    answer "step", ``score`` on the answer "score" (the service answers 422 ``env_error``)."""

    name = "faulty"
    version = "0.1.0"
    description = "Raises on request, to test how the service answers an environment's bugs."
    kind = "single_turn"
    Config = EnvConfig
    reward_weights = {"answered": 1.0}

    def examples(self, config, split):
        return ["fine", "reset"]

    def reset(self, config, example, seed):
        if example == "reset":
            raise ValueError("a reset that fails")
        return Reset({"said": None}, [{"role": "user", "content": "Say anything."}])

    def step(self, config, state, action, rng):
        said = action.get("content") or ""
        if said == "step":
            raise KeyError(said)
        return Transition({"said": said}, [], True)

    def score(self, config, state):
        if state["said"] == "score":
            raise ZeroDivisionError("a score that fails")
        return Score({"answered": float(state["said"] is not None)}, {})
