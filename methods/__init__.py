"""One file per method. Importing this package registers them all (gcframe.registry.REGISTRY, re-exported by
methods.base), then the methods of installed packages (entry-point group `gcframe.methods`, of which this package is
the first entry: pyproject.toml); a user's own file comes in through gcframe.plugins."""
from methods.base import REGISTRY, Method, MethodConfig, default_methods, get_method, register  # noqa: F401
from methods import sft  # noqa: F401  (registration order = the order --list-methods prints)
# the seed's eight (DeepSeekMath §5.2.1's table, RLOO)
from methods import rft  # noqa: F401
from methods import online_rft  # noqa: F401
from methods import ppo  # noqa: F401
from methods import grpo  # noqa: F401
from methods import grpo_ps  # noqa: F401
from methods import dpo  # noqa: F401
from methods import rloo  # noqa: F401
# SFT given the checker's information
from methods import sft_filtered  # noqa: F401
from methods import sft_clean  # noqa: F401
# the GRPO family: advantage, normaliser, ratio and clip
from methods import dr_grpo  # noqa: F401
from methods import dapo  # noqa: F401
from methods import gspo  # noqa: F401
from methods import cispo  # noqa: F401
from methods import sapo  # noqa: F401
# REINFORCE-style: the advantage estimator, or the baseline's data source
from methods import reinforce_pp  # noqa: F401
from methods import reinforce_pp_baseline  # noqa: F401
from methods import remax  # noqa: F401
from methods import gpg  # noqa: F401
# preference methods
from methods import ipo  # noqa: F401
from methods import simpo  # noqa: F401
from methods import kto  # noqa: F401
from methods import orpo  # noqa: F401
from methods import online_dpo  # noqa: F401
from methods import rpo  # noqa: F401
# the field's remaining policy losses: a floor, a batch std, a quadratic penalty, a divergence mask, a geometric
# mean, covariance-selected tokens, a mean-scaled advantage
from methods import dual_clip_ppo  # noqa: F401
from methods import lite_ppo  # noqa: F401
from methods import kimi  # noqa: F401
from methods import dppo  # noqa: F401
from methods import gmpo  # noqa: F401
from methods import clip_cov  # noqa: F401
from methods import kl_cov  # noqa: F401
from methods import maxrl  # noqa: F401
# a teacher beside the checker: on-policy and sequence-level distillation
from methods import opd  # noqa: F401
from methods import sft_teacher  # noqa: F401
from gcframe.registry import load_entry_points  # noqa: E402  (installed packages' methods: group gcframe.methods)

load_entry_points()

__all__ = ["REGISTRY", "Method", "MethodConfig", "default_methods", "get_method", "register"]
