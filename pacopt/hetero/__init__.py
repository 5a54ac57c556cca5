"""Heterogeneous resources and cost (pacopt's version of HeterPS): types, the job-level model,
plans and their validator, and the greedy baseline."""

from pacopt.hetero.model import (
    HeteroPlan,
    HeteroProblem,
    Stage,
    build_hetero_problem,
    plan_from_types,
    plan_problems,
    step_budget,
)
from pacopt.hetero.types import (
    EXAMPLE_TYPES,
    ResourceTypes,
    load_types,
    types_from_dict,
)

__all__ = ["EXAMPLE_TYPES", "HeteroPlan", "HeteroProblem", "ResourceTypes", "Stage",
           "build_hetero_problem", "load_types", "plan_from_types", "plan_problems", "step_budget",
           "types_from_dict"]
