"""chunkyard: chunk a folder of documents into versioned, reviewable Parquet datasets.

The documented API is ``chunk_document`` and ``load_config``; the layers are ``chunkyard.chunking``
(the pure core), ``chunkyard.flows`` (Prefect orchestration and the command line) and
``chunkyard.gui`` (the PySide6 reviewer). See docs/design.md.
"""

from chunkyard.chunking.api import Chunk, ChunkedDocument, chunk_document, split_document
from chunkyard.chunking.config import Config, load_config

__all__ = ["Chunk", "ChunkedDocument", "Config", "chunk_document", "load_config", "split_document"]
