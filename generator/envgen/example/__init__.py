"""The bundled A5-shaped example for `envgen demo`: real wheels, conda packages and git repos,
served on 127.0.0.1."""
