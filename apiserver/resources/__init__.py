"""One module per served kind."""
