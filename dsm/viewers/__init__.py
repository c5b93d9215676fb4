"""The viewers: ``dsm view`` (a terminal app, :mod:`dsm.viewers.tui`) and ``dsm serve`` (a local web app).

They stand on the inspect layer (:mod:`dsm.inspect`: row sources, the view model, masking, episodes, the row
diff) and the commands, never the other way; the CLI starts them. Neither reads more of a dataset than it
shows.
"""
