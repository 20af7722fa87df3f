"""The model's typed error: a problem, shape or configuration it cannot evaluate, in one clear line."""


class ModelError(ValueError):
    """A configuration the model cannot evaluate (one clear line)."""
