"""Heterogeneous resources and cost (pacopt's version of HeterPS): types, the job-level model,
plans and their validator, and the greedy baseline."""

from pacopt.cluster.hetero.model import (
    HeteroPlan,
    HeteroProblem,
    Stage,
    build_problem,
    plan_from_types,
    plan_problems,
    step_budget,
)
from pacopt.cluster.hetero.types import EXAMPLE_TYPES, ResourceTypes, load_types, types_from_dict

__all__ = ["EXAMPLE_TYPES", "HeteroPlan", "HeteroProblem", "ResourceTypes", "Stage",
           "build_problem", "load_types", "plan_from_types", "plan_problems", "step_budget",
           "types_from_dict"]
