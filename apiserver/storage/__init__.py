"""Storage backends behind one protocol."""
