"""coreio: an extension API server for RoleBindings and Events."""

__version__ = "0.1.0"
