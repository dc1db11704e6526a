"""envgen: compile a version matrix into pinned, reproducible, verified environments."""


def __getattr__(name: str) -> str:
    # `envgen.__version__` is read from the installed metadata on first use: importlib.metadata
    # costs a command's start-up more than most commands need it (--version, an internal error, a
    # bundle's manifest).
    if name != "__version__":
        raise AttributeError(f"module 'envgen' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("envgen")
    except PackageNotFoundError:  # running from a source tree that was never installed
        found = "0.0.0"
    globals()["__version__"] = found
    return found
