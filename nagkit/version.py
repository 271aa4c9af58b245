"""nagkit's version (a module of its own so that every layer can read it without importing the
package's ``__init__``, which is the Python API on top of everything)."""

__version__ = "0.1.0"
