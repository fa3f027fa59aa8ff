"""The generic registry: the store of one kind over the Storage protocol (`store.ResourceStore`)."""
