"""The progress bar every layer uses: tqdm's notebook widget where it can be drawn, its text
bar everywhere else.

``tqdm.auto`` picks the widget in any notebook, and without ``ipywidgets`` installed it then
warns ("IProgress not found") and prints a plain bar anyway; here the widget is chosen only when
``ipywidgets`` is importable, so a notebook without it gets the text bar and no warning."""

from __future__ import annotations

from importlib.util import find_spec

if find_spec("ipywidgets") is not None:
    from tqdm.auto import tqdm
else:
    from tqdm.std import tqdm

__all__ = ["tqdm"]
