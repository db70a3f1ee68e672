# SPDX-License-Identifier: Apache-2.0
"""A PyTorch map-style dataset over a batchfs mount: one item, one batch.

    import batchfs, torch
    from batchfs.torch import BatchDataset
    ds = BatchDataset("/mnt/ds", epoch=0, features=["x", "label"])
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    for epoch in range(10):
        ds.set_epoch(epoch)
        for batch in dl:          # {"x": tensor [B, ...], "label": tensor [B]}
            ...

The mount already shuffled and batched the records, so the DataLoader gets
``batch_size=None`` (no collation) and needs no sampler: item ``i`` is
``epoch-EEEE/batch-IIIIII``. Call :meth:`BatchDataset.set_epoch` before
iterating: every worker process sees it, persistent ones
(``persistent_workers=True``) included, whatever their start method (the
epoch is kept in shared memory, not in each worker's copy of the dataset).
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, Optional, Union

import numpy as np
import torch
import torch.utils.data

from . import Mount
from .numpy import load_safetensors

__all__ = ["BatchDataset"]


class BatchDataset(torch.utils.data.Dataset):
    """Map-style dataset: ``ds[i]`` is batch ``i`` of the current epoch as a
    dict ``{tensor name: torch.Tensor}``, read from its ``.safetensors``
    file (one file read per batch).

    ``mount_or_path`` is a :class:`batchfs.Mount`, a mount point, or a
    ``rank-RRRR/`` folder of one; ``epoch`` the first epoch; ``features``
    keeps only those features (each with its ``.lengths`` and the like).
    ``len(ds)`` is the number of batches of the current epoch.

    The current epoch lives in a one-element shared-memory tensor, so that
    :meth:`set_epoch` in the main process reaches DataLoader workers that
    were started before it (``persistent_workers=True``), forked or
    spawned. A pickled or deep-copied dataset gets its own epoch.
    """

    def __init__(self, mount_or_path: Union[Mount, str, "os.PathLike[str]"], epoch: int = 0,
                 features: Optional[Iterable[str]] = None):
        self.mount = mount_or_path if isinstance(mount_or_path, Mount) else Mount(mount_or_path)
        self.features = list(features) if features is not None else None
        self._shared_epoch = torch.zeros(1, dtype=torch.int64).share_memory_()
        self.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        """The epoch served now."""
        return int(self._shared_epoch[0])

    def set_epoch(self, epoch: int) -> None:
        """Serve epoch ``epoch`` from now on (its own permutation of the
        records), in this process and in every DataLoader worker."""
        e = int(epoch)
        self._len = len(self.mount.epoch(e))  # every epoch has as many batches
        self._shared_epoch[0] = e

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> Dict[str, torch.Tensor]:
        if i < 0:
            i += self._len
        epoch = self.epoch
        if not 0 <= i < self._len:
            raise IndexError("batch %d: epoch %d has %d batches" % (i, epoch, self._len))
        arrays = load_safetensors(self.mount.epoch(epoch).batch_path(i), self.features)
        # a tensor after an odd count of narrower ones may start unaligned
        # in the file: copy just those
        return {k: torch.from_numpy(np.require(v, requirements=["A", "W"]))
                for k, v in arrays.items()}

    def __repr__(self) -> str:
        return "BatchDataset(%r, epoch=%d, features=%r)" % (self.mount.path, self.epoch,
                                                             self.features)
