from coreio_export.cli import main

main()
