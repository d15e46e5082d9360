"""Sync on-hand inventory from the warehouse management system (WMS) to inventory-service.

This script runs every 15 minutes as a Kubernetes CronJob (``inventory-sync`` in the
``storefront`` namespace). It pulls on-hand quantities for each distribution center
(DC-RNO and DC-CMH) from the WMS export API, subtracts units reserved for open orders,
and pushes the resulting available-to-sell (ATS) numbers to inventory-service.

Run it manually with::

    python tools/inventory_sync.py --dc DC-RNO --dry-run

Owner: Platform team (#platform-help). See engineering/deploy-guide.md for deploys.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable, Iterator

LOG = logging.getLogger("inventory_sync")

DISTRIBUTION_CENTERS = ("DC-RNO", "DC-CMH")
SAFETY_STOCK_DEFAULT = 2  # units held back per SKU to absorb counting errors
BATCH_SIZE = 500


def retry(attempts: int = 3, backoff: float = 2.0) -> Callable:
    """Retry the decorated function on network errors with exponential backoff."""

    def decorator(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            delay = 1.0
            for attempt in range(1, attempts + 1):
                try:
                    return func(*args, **kwargs)
                except (OSError, TimeoutError) as exc:
                    if attempt == attempts:
                        raise
                    LOG.warning("%s failed (%s), retry %d/%d in %.0fs",
                                func.__name__, exc, attempt, attempts - 1, delay)
                    time.sleep(delay)
                    delay *= backoff
        return wrapper

    return decorator


@dataclass(frozen=True)
class StockLevel:
    """On-hand and reserved quantities for one SKU at one distribution center."""

    sku: str
    dc: str
    on_hand: int
    reserved: int = 0
    safety_stock: int = SAFETY_STOCK_DEFAULT
    counted_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    @property
    def available(self) -> int:
        """Units we can sell right now; never negative."""
        return max(self.on_hand - self.reserved - self.safety_stock, 0)

    def to_payload(self) -> dict:
        return {
            "sku": self.sku,
            "location": self.dc,
            "available": self.available,
            "as_of": self.counted_at.isoformat(),
        }


class WMSClient:
    """Minimal client for the WMS export API (read-only)."""

    def __init__(self, base_url: str, token: str, timeout: float = 20.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.timeout = timeout

    @classmethod
    def from_env(cls) -> "WMSClient":
        """Build a client from ``WMS_BASE_URL`` and ``WMS_TOKEN``."""
        return cls(os.environ["WMS_BASE_URL"], os.environ["WMS_TOKEN"])

    @retry(attempts=4)
    def _get(self, path: str) -> dict:
        request = urllib.request.Request(
            f"{self.base_url}{path}",
            headers={"Authorization": f"Bearer {self._token}", "Accept": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return json.load(response)

    def stock_levels(self, dc: str) -> Iterator[StockLevel]:
        """Yield stock levels for every SKU at ``dc``, following pagination."""
        cursor = ""
        while True:
            page = self._get(f"/export/stock?dc={dc}&cursor={cursor}")
            for row in page["items"]:
                yield StockLevel(
                    sku=row["sku"],
                    dc=dc,
                    on_hand=int(row["on_hand"]),
                    reserved=int(row.get("allocated", 0)),
                    safety_stock=int(row.get("safety_stock", SAFETY_STOCK_DEFAULT)),
                )
            cursor = page.get("next_cursor") or ""
            if not cursor:
                break


class InventoryPublisher:
    """Pushes available-to-sell numbers to inventory-service in batches."""

    def __init__(self, base_url: str, token: str, dry_run: bool = False) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.dry_run = dry_run
        self.published = 0

    @staticmethod
    def batched(levels: Iterable[StockLevel], size: int = BATCH_SIZE) -> Iterator[list]:
        """Group stock levels into lists of at most ``size`` items."""
        batch: list = []
        for level in levels:
            batch.append(level)
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch

    @retry(attempts=3)
    def _post(self, batch: list) -> None:
        body = json.dumps({"levels": [lvl.to_payload() for lvl in batch]}).encode("utf-8")
        request = urllib.request.Request(
            f"{self.base_url}/v1/stock/bulk",
            data=body,
            method="PUT",
            headers={"Authorization": f"Bearer {self._token}",
                     "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            if response.status >= 300:
                raise OSError(f"inventory-service returned HTTP {response.status}")

    def publish(self, levels: Iterable[StockLevel]) -> int:
        """Publish all levels and return the number of SKUs sent."""
        for batch in self.batched(levels):
            if self.dry_run:
                LOG.info("dry run: would publish %d levels, first SKU %s",
                         len(batch), batch[0].sku)
            else:
                self._post(batch)
            self.published += len(batch)
        return self.published


def sync_dc(dc: str, wms: WMSClient, publisher: InventoryPublisher) -> int:
    """Sync one distribution center and return the number of SKUs published."""
    started = time.monotonic()
    count = publisher.publish(wms.stock_levels(dc))
    LOG.info("synced %s: %d SKUs in %.1fs", dc, count, time.monotonic() - started)
    return count


def parse_args(argv: list | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dc", choices=DISTRIBUTION_CENTERS, action="append",
                        help="distribution center to sync (default: all)")
    parser.add_argument("--dry-run", action="store_true",
                        help="read from the WMS but do not publish")
    parser.add_argument("--verbose", "-v", action="store_true")
    return parser.parse_args(argv)


def main(argv: list | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    wms = WMSClient.from_env()
    total = 0
    for dc in args.dc or DISTRIBUTION_CENTERS:
        publisher = InventoryPublisher(os.environ["INVENTORY_API_URL"],
                                       os.environ["INVENTORY_API_TOKEN"],
                                       dry_run=args.dry_run)
        total += sync_dc(dc, wms, publisher)
    LOG.info("done: %d SKUs across %d DCs", total, len(args.dc or DISTRIBUTION_CENTERS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
