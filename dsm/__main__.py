from dsm.cli import main

main()
