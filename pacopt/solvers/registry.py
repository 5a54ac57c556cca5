"""The one registry of methods: every name ``solve`` knows, its kind, a one-line description and
where it is loaded from. The CLI's help, :func:`pacopt.solvers.api.solve`, the validator and the
study files all read it.

**Registering a method** is one entry in :data:`METHODS`. A name ending in ``:K`` is a family that
takes a parameter (``fixed:K`` accepts ``fixed:4``). The loader (``"module:attribute"``) is
imported only when the method runs:

- an *online* method's loader is a policy factory ``f(method, instance, checkpoint=None)``
  (``pacopt.online.policies.make_policy`` for the heuristics and baselines); the policy plays
  through the online simulator;
- any other kind's loader is a runner ``run(instance, method, model, *, time_limit, threads,
  seed, progress)`` returning a :class:`~pacopt.model.solution.Solution` (not yet validated).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from pacopt.infra.errors import InputError
from pacopt.infra.extras import missing_extra
from pacopt.online.policies import POLICIES

#: What a method is: ``online`` (decides each job at its arrival, proves no bound; the
#: ``-given-label`` variants are oracles that also read a label computed from every job's beta,
#: :attr:`Method.reads_future`), ``offline``
#: (all arrivals known, no proof), ``exact`` (all arrivals known, incumbent and proven bound),
#: ``bound`` (an incumbent and a relaxation's bound, no search).
KINDS = ("online", "offline", "exact", "bound")


@dataclass(frozen=True)
class Method:
    """One registered method (see the module doc)."""

    name: str
    kind: str
    description: str
    loader: str
    #: An oracle that plays through the online simulator but reads every job's beta, future
    #: jobs included (the ``-given-label`` variants; ``tests/test_online_only.py``).
    reads_future: bool = False

    @property
    def online(self) -> bool:
        return self.kind == "online"

    @property
    def summary(self) -> str:
        """``kind: description``, as ``solve --help`` lists it (``online, reads future jobs:``
        for an oracle variant)."""
        kind = f"{self.kind}, reads future jobs" if self.reads_future else self.kind
        return f"{kind}: {self.description}"

    def load(self):
        """The policy factory or runner, imported now; an extra it needs and that is not
        installed is one line naming it (:mod:`pacopt.infra.extras`)."""
        module, _, attribute = self.loader.partition(":")
        try:
            return getattr(importlib.import_module(module), attribute)
        except ModuleNotFoundError as err:
            missing = missing_extra(err, f"--method {self.name}")
            if missing is None or missing is err:  # not an extra's, or said already
                raise
            raise missing from err


def _first_paragraph(doc: str | None) -> str:
    return " ".join((doc or "").strip().split("\n\n")[0].split())


_EXACT = "pacopt.solvers.exact_runner:run_exact"
METHODS: dict[str, Method] = {m.name: m for m in [
    *(Method(name, "online", _first_paragraph(cls.__doc__), "pacopt.online.policies:make_policy",
             reads_future=getattr(cls, "reads_future", False))
      for name, cls in POLICIES.items()),
    Method("pac-ml", "online", "the learned agent (GNN policy, PAC-ML's idea, trained by "
           "imitating a rollout teacher); unless --checkpoint, per decision the shipped "
           "fine-tune of the beta distribution the arrivals so far look like, else the general "
           "checkpoint", "pacopt.learned.agent:learned_policy"),
    Method("pac-ml-given-label", "online", "pac-ml given the instance's beta distribution "
           "label: an oracle that reads every job's beta, future jobs included, to pick one "
           "shipped checkpoint for the whole episode",
           "pacopt.learned.agent:learned_policy", reads_future=True),
    Method("lp-online", "online", "at each arrival an LP over the running jobs, the arriving job "
           "and sampled future arrivals; the arriving job's degree is rounded from it",
           "pacopt.online.lp_online:lp_online_policy"),
    Method("as-requested", "online", "each job at the degree its user requested (a trace's "
           "GPUs, capped to the cluster): what the real cluster did",
           "pacopt.online.trace_policies:make_trace_policy"),
    Method("elasticflow", "online", "ElasticFlow's admission control (the minimum satisfactory "
           "share must fit now) and greedy allocation of idle workers, adapted to non-elastic "
           "jobs", "pacopt.online.trace_policies:make_trace_policy"),
    Method("milp", "exact", "offline optimum, Pyomo MILP solved by HiGHS", _EXACT),
    Method("cpsat", "exact", "offline optimum, OR-Tools CP-SAT model", _EXACT),
    Method("bound", "bound", "the warm starts' best schedule (offline best fit and its beam "
           "search, hindsight rollouts, the online methods) as incumbent, the worker-count "
           "relaxation as upper bound; no exact search", _EXACT),
    Method("lp-round", "offline", "LP relaxation with randomised rounding and re-placement (Yu et "
           "al.), best of 48 seeded rounds; the worker-count LP as bound",
           "pacopt.solvers.exact_runner:run_lp_round"),
]}
DEFAULT_METHOD = "min-feasible"


def method_family(method: str) -> str:
    """The :data:`METHODS` key ``method`` belongs to (``fixed:4`` -> ``fixed:K``); InputError
    naming the known methods when there is none. A recorded name that carries its choice,
    ``tuned(fixed-or-min:6, A)``, belongs to ``tuned``."""
    if method in METHODS:
        return method
    if method.endswith(")") and method.partition("(")[0] in METHODS:
        return method.partition("(")[0]
    head, sep, _ = method.partition(":")
    for key in METHODS:
        if sep and key.partition(":")[0] == head and key.partition(":")[1]:
            return key
    raise InputError(f"--method: unknown method '{method}'; known: {', '.join(METHODS)}")


def method_entry(method: str) -> Method:
    """The registry entry of ``method`` (a name or a family member such as ``fixed:4``)."""
    return METHODS[method_family(method)]


def is_online(method: str) -> bool:
    """Whether ``method`` is an online policy (it decides jobs one at a time, proves no bound)."""
    return method_entry(method).online
