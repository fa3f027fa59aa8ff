from apiserver.cli import main

main()
