"""``python -m dsm.json_schema`` (``make schemas``): write the generated validators."""

from dsm.json_schema import main

main()
