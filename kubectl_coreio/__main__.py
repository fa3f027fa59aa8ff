from kubectl_coreio.cli import main

main()
