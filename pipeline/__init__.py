"""Apache Beam wiring of the Refinery stages."""
import logging


class _HideOptionalGcpWarning(logging.Filter):
    """Beam warns on import that Google Cloud client libraries are absent; we do not use them locally."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "apitools not found" not in record.getMessage()


logging.getLogger().addFilter(_HideOptionalGcpWarning())
