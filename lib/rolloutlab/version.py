"""The package's version, in a module of its own: modules that record it (the report, the lake's
manifest) import it from here, never from the package they belong to."""
__version__ = "0.1.0"
