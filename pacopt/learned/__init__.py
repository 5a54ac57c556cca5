"""The learned partitioner (PAC-ML's idea on pacopt's model).

- :mod:`~pacopt.learned.features`: what the agent sees of a decision (job graph, cluster, and
  per degree the live first-fit outcome), as fixed-size arrays;
- :mod:`~pacopt.learned.env`: the gymnasium environment over
  :class:`~pacopt.model.simulator.OnlineEpisode`, one decision per arriving job;
- :mod:`~pacopt.learned.gnn`: the torch-geometric graph encoder and the masked actor-critic
  policy for sb3-contrib's MaskablePPO;
- :mod:`~pacopt.learned.teacher`: the teacher (``--teacher``, parsed once into a
  :class:`~pacopt.learned.teacher.TeacherSpec`) whose choices the student imitates;
- :mod:`~pacopt.learned.train`: the fit loop, imitation warm start plus MaskablePPO, resumable;
- :mod:`~pacopt.learned.callbacks`: what runs between the fit's steps (progress, the CSV curve,
  validation, the latest checkpoint, the stop);
- :mod:`~pacopt.learned.agent`: the trained agent as a pacopt ``Policy`` (``--method pac-ml``)
  and the shipped checkpoints;
- :mod:`~pacopt.learned.player`: a checkpoint's network as play needs it, compiled by
  TorchScript once into the cache with its head in numpy, so that play needs torch alone, and
  on graphs the cache has embedded not even torch;
- :mod:`~pacopt.learned.checkpoint_meta`: what each checkpoint says about itself
  (``pacopt.json``: format, code version, recipe, settings, ...) and the format check on load;
- :mod:`~pacopt.learned.recipes`: the named recipes of ``pacopt train --recipe``.
- :mod:`~pacopt.learned.label_cache`: the teacher's labelled episodes kept on disk
  (``pacopt train --label-cache``), read back by a later run that would label them again.
"""
