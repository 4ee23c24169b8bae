"""The textbook losses `gcframe.verify` checks the engine against: one function per method, written from the paper's
equation (cited by number), independently of the method's GC code and of the engine's aggregation.

    TEXTBOOK[name](method, batch, logp) -> scalar loss whose gradient the engine's −aggregate(GC·log π) must equal

A method's loss lives in the module of its family: classic (the seed's table), plus a module per family of the
methods added beside them. A plugin declares its own with `@textbook("name")` (importable as gcframe.verify.textbook).
"""
from gcframe.textbook.core import TEXTBOOK, _mean_as_written, textbook  # noqa: F401
from gcframe.textbook import classic  # noqa: F401  (registers on import; the order --list-methods uses)
from gcframe.textbook import preference_zoo  # noqa: F401
from gcframe.textbook import policy_gradient_zoo  # noqa: F401
from gcframe.textbook import baselines_zoo  # noqa: F401
from gcframe.textbook import field_zoo  # noqa: F401
from gcframe.textbook import distillation  # noqa: F401
