"""Analysis: gap studies over grids of instances x methods (local process pool or Ray), metrics
over their results, the optimality gap against exact results, plots, and the paper's table.

The public functions, in the order a user meets them::

    study = load_study("studies/paper.yaml")             # checked up front (InputError)
    table = run_study(study, "paper-results")            # tidy table; resumes; --ray to scale
    table = read_table("paper-results")                  # later, from disk
    jobs = jobs_frame(table, load_solutions("paper-results"))
    blocking_by(jobs, ["method", "graph"]); plot_blocking_by_distribution(table)
    plot_gap_split(gap_split_frame(table, "pac-ml"))     # hindsight, placement, degree choice
"""

from pacopt.analysis.gap_split import (
    GapSplit,
    gap_split,
    gap_split_frame,
    plot_gap_split,
    rule_names,
    split_gap,
)
from pacopt.analysis.metrics import (
    BETA_BANDS,
    beta_band,
    blocking_by,
    blocking_by_reason,
    cluster_at,
    compare_jobs,
    degree_table,
    degree_vs_beta,
    distribution,
    jobs_frame,
    load_solutions,
    summary,
    utilisation_over_time,
)
from pacopt.analysis.paper_results import PAPER_BLOCKING, paper_markdown, paper_table
from pacopt.analysis.plots import (
    plot_blocking_by_distribution,
    plot_blocking_vs_load,
    plot_cluster,
    plot_degree_table,
    plot_degree_vs_beta,
    plot_gap_vs_jobs,
    plot_rounds,
    plot_training_curve,
    plot_utilisation,
    study_plots,
)
from pacopt.analysis.runner import read_table, run_cell, run_study
from pacopt.analysis.study_spec import (
    Cell,
    Study,
    load_study,
    method_known,
    study_from_dict,
)
from pacopt.analysis.table import add_gaps, comparable

__all__ = [name for name in dir() if not name.startswith("_") and name not in
           ("gap_split", "metrics", "paper_results", "plots", "runner", "study_spec", "table")]
