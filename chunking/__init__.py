"""chunkyard's pure core: documents, units, strategies, findings, config, datasets, review ledger.

Never imports Prefect or Qt.
"""

from chunkyard.chunking.api import Chunk, ChunkedDocument, chunk_document, split_document
from chunkyard.chunking.config import Config, load_config

__all__ = ["Chunk", "ChunkedDocument", "Config", "chunk_document", "load_config", "split_document"]
