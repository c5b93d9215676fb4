"""The library: one module per command; each function returns a result object and never prints.

Import a command from its module (``from dsm.commands.verify import verify``) or use the top-level API
(``dsm.verify``); this package re-exports nothing, so that loading one command loads only what it needs.
"""

__all__: list[str] = []
