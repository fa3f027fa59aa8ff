"""The coreio operator (installed as apiserver_operator; the stdlib owns `operator`)."""
