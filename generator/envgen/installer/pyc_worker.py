"""Run by an env's own python (`python -I pyc_worker.py STORE`, the standard library alone, any
Python 3.7 or later): the bytecode of each python source named on stdin, one path a line, taken from
STORE when it holds the bytecode of the same bytes for this interpreter, else compiled and kept
there. Its one line of output counts both (bytecode.py logs it).

The bytecode is hash-based and checked (PEP 552): valid for any file with the same bytes wherever
it lies, so one compilation serves every prefix and venv of the machine; the interpreter checks the
source's hash on each import and compiles anew when the file changed. A kept entry is used only when
its header names this interpreter's magic number and the source's hash and its body loads as code:
a damaged one is compiled again. Every file is written whole (a temporary file, then renamed). A
source that does not read or compile is left as it is, as conda and compileall leave it: python
compiles it when it is imported."""

import contextlib
import hashlib
import importlib.util
import marshal
import os
import py_compile
import sys
import types

# PEP 552's flags: hash-based (bit 0), checked against the source (bit 1).
_CHECKED_HASH = 0b11


def main() -> None:
    store = os.path.join(
        sys.argv[1], f"{sys.implementation.cache_tag}-{importlib.util.MAGIC_NUMBER.hex()}"
    )
    kept = compiled = failed = 0
    for line in sys.stdin:
        source = line.rstrip("\n")
        try:
            if _place(source, store):
                kept += 1
            else:
                compiled += 1
        except (OSError, py_compile.PyCompileError, ValueError):
            failed += 1
    sys.stdout.write(f"{kept} from the store, {compiled} compiled, {failed} left as they are\n")


def _place(source: str, store: str) -> bool:
    """Write the bytecode of `source` where its interpreter looks for it; whether STORE had it."""
    with open(source, "rb") as file:
        data = file.read()
    key = hashlib.sha256(data).hexdigest()
    entry = os.path.join(store, key[:2], f"{key}.pyc")
    target = importlib.util.cache_from_source(source)
    bytecode = _kept(entry, data)
    if bytecode is not None:
        _write(target, bytecode)
        return True
    py_compile.compile(
        source,
        cfile=target,
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )
    with open(target, "rb") as file:
        bytecode = file.read()
    with contextlib.suppress(OSError):  # a store it cannot write to: this env has it all the same
        _write(entry, bytecode)
    return False


def _kept(entry: str, data: bytes) -> "bytes | None":
    """The kept bytecode of `data`, or None when there is none or it is not whole."""
    try:
        with open(entry, "rb") as file:
            bytecode = file.read()
    except OSError:
        return None
    header = (
        importlib.util.MAGIC_NUMBER
        + _CHECKED_HASH.to_bytes(4, "little")
        + importlib.util.source_hash(data)
    )
    if not bytecode.startswith(header):
        return None
    try:
        code = marshal.loads(bytecode[len(header) :])
    except (EOFError, ValueError, TypeError):
        return None
    return bytecode if isinstance(code, types.CodeType) else None


def _write(path: str, data: bytes) -> None:
    """`data` as the file at `path`, whole or not at all, readable as the umask allows (as
    py_compile writes it)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


if __name__ == "__main__":
    main()
