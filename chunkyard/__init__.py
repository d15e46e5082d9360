"""chunkyard: chunk a folder of documents into versioned, reviewable Parquet datasets.

The documented API is ``chunk_document`` and ``load_config``; the layers are ``chunkyard.chunking``
(the pure core), ``chunkyard.flows`` (Prefect orchestration and the command line) and
``chunkyard.gui`` (the PySide6 reviewer). See docs/design.md.
"""

import pkgutil

# In a checkout, this folder holds only this file (setuptools maps chunkyard.chunking to chunking/ and
# so on). With chunkyard installed from a wheel and Python started in the checkout, the current folder
# leads sys.path and this folder is found first: look for the subpackages in the installed copy too.
__path__ = pkgutil.extend_path(__path__, __name__)

from chunkyard.chunking.api import Chunk, ChunkedDocument, chunk_document, split_document  # noqa: E402
from chunkyard.chunking.config import Config, load_config  # noqa: E402

__all__ = ["Chunk", "ChunkedDocument", "Config", "chunk_document", "load_config", "split_document"]
