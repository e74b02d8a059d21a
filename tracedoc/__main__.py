from tracedoc.console import main

main()
