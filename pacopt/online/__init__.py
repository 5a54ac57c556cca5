"""The online policies: at each arrival they pick a degree (0 = reject), and may place the job,
from what has arrived so far. The heuristics, the fixed rules and ``tuned`` (``policies``), the
recognition of the beta distribution (``recognise``), rollouts (``rollout``), the trace rules
(``trace_policies``) and the LP policy (``lp_online``). Each plugs into the simulator through
:class:`pacopt.model.decision.Policy`."""
