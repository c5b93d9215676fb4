"""The viewers: ``dsm view`` (a terminal app, :mod:`dsm.viewers.tui`) and ``dsm serve`` (a local web app,
:mod:`dsm.viewers.web`).

Both stand on the inspect layer (:mod:`dsm.inspect`: row sources, the view model, masking, episodes, the row
diff) and the commands, never the other way; the CLI starts them. Neither reads more of a dataset than it
shows. Each lives in an extra (``dsm[view]``, ``dsm[web]``) and says which when it is missing.
"""
