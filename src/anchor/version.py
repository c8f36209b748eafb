"""The version of anchor, apart from the package so that any module can name it (a page footer, a
run's configuration) without importing ``anchor`` itself and everything it re-exports."""

__version__ = "0.1.0"
