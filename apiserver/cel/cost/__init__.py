"""CEL cost accounting."""
