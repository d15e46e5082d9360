"""The PySide6 reviewer: a thin skin over ``chunkyard.chunking.review`` and ``chunkyard.chunking.ledger``.

``models`` (Qt item models over the review index), ``source_view``, ``stats_view`` and ``main_window``
(views), ``controller`` (selection, verdicts, undo) and ``app`` (the ``chunkyard review`` entry point).
Review logic — queues, progress, "next suspicious" — lives in ``chunking`` and is tested without Qt.
"""
