"""The HTTP face of the server: request decoding, response encoding, handlers, middleware."""
