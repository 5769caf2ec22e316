"""Hand gpupeek's ResourceMetricCollector figures to the loggers training code already has.

    from gpupeek_callbacks import add_scalar_dict            # TensorBoard (nvitop's helper)
    add_scalar_dict(writer, "resources", collector.collect(), global_step=step)

    from gpupeek_callbacks import LightningGpuStatsLogger     # PyTorch Lightning
    trainer = Trainer(callbacks=[LightningGpuStatsLogger()], logger=True)

    from gpupeek_callbacks import KerasGpuStatsLogger         # Keras (or tf.keras)
    model.fit(x, y, callbacks=[KerasGpuStatsLogger()])

    scalars(collector.collect())                              # any other logger: a dict

The Lightning and Keras classes are built on first use from whichever of `lightning` /
`pytorch_lightning` and `keras` / `tensorflow.keras` is installed; this module imports
none of them by itself, so it loads anywhere. No NVML here either: the figures are the
collector's, read from gpupeekd's segment.
"""

from __future__ import annotations

import importlib
import math
from typing import Dict, Optional

# LightningGpuStatsLogger and KerasGpuStatsLogger are built on first access (module
# __getattr__ below); they stay out of __all__ so that `import *` needs no framework.
__all__ = ["add_scalar_dict", "scalars"]


def add_scalar_dict(writer, main_tag: str, tag_scalar_dict: Dict[str, float],
                    global_step=None, walltime=None):
    """`writer.add_scalar(f"{main_tag}/{tag}", value, ...)` for each item: nvitop's
    TensorBoard helper (a torch.utils.tensorboard or tensorboardX SummaryWriter)."""
    for tag, scalar in tag_scalar_dict.items():
        writer.add_scalar(f"{main_tag}/{tag}", scalar, global_step=global_step,
                          walltime=walltime)


def scalars(metrics: Dict[str, float], prefix: Optional[str] = None,
            drop_nan: bool = True) -> Dict[str, float]:
    """A plain {name: float} for any logger: `prefix/` before each key if given, and NaN
    values (a figure the GPU does not report) left out unless `drop_nan` is False."""
    out = {}
    for key, value in metrics.items():
        if drop_nan and isinstance(value, float) and math.isnan(value):
            continue
        out[f"{prefix}/{key}" if prefix else key] = float(value)
    return out


def _first_base(candidates, what: str):
    for module, attr in candidates:
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
    names = " or ".join(m.split(".")[0] for m, _ in candidates)
    raise ImportError(f"gpupeek_callbacks.{what} needs {names} installed")


def _collector(collector, interval):
    if collector is not None:
        return collector
    from gpupeek_collector import ResourceMetricCollector
    return ResourceMetricCollector(interval=interval)


def _lightning_class():
    base = _first_base([("lightning.pytorch.callbacks", "Callback"),
                        ("pytorch_lightning.callbacks", "Callback")], "LightningGpuStatsLogger")

    class LightningGpuStatsLogger(base):
        """Logs the collector's figures through the Trainer's logger: every
        `log_every_n_steps` training batches the window of the running epoch (keys
        `<tag>/...`), and at the end of each epoch the whole epoch's. Only rank 0 logs."""

        def __init__(self, collector=None, tag: str = "resources",
                     log_every_n_steps: int = 50, interval: float = 1.0):
            super().__init__()
            self.collector = _collector(collector, interval)
            self.tag, self.every = tag, max(1, int(log_every_n_steps))
            self._batches = 0

        def _log(self, trainer):
            if getattr(trainer, "is_global_zero", True) and trainer.logger is not None:
                trainer.logger.log_metrics(scalars(self.collector.collect()),
                                           step=trainer.global_step)

        def on_train_epoch_start(self, trainer, pl_module):
            self.collector.activate(self.tag)
            self._batches = 0

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self._batches += 1
            if self._batches % self.every == 0:
                self._log(trainer)

        def on_train_epoch_end(self, trainer, pl_module):
            self._log(trainer)
            self.collector.deactivate(self.tag)

    return LightningGpuStatsLogger


def _keras_class():
    base = _first_base([("keras.callbacks", "Callback"),
                        ("tensorflow.keras.callbacks", "Callback")], "KerasGpuStatsLogger")

    class KerasGpuStatsLogger(base):
        """Adds the collector's figures to Keras' `logs` (so History, CSVLogger and
        TensorBoard callbacks after it see them): every `log_every_n_batches` batches
        the window of the running epoch, and at each epoch's end the whole epoch's."""

        def __init__(self, collector=None, tag: str = "resources",
                     log_every_n_batches: Optional[int] = None, interval: float = 1.0):
            super().__init__()
            self.collector = _collector(collector, interval)
            self.tag, self.every = tag, log_every_n_batches
            self._batches = 0

        def on_epoch_begin(self, epoch, logs=None):
            self.collector.activate(self.tag)
            self._batches = 0

        def on_train_batch_end(self, batch, logs=None):
            self._batches += 1
            if self.every and self._batches % self.every == 0 and logs is not None:
                logs.update(scalars(self.collector.collect()))

        def on_epoch_end(self, epoch, logs=None):
            if logs is not None:
                logs.update(scalars(self.collector.collect()))
            self.collector.deactivate(self.tag)

    return KerasGpuStatsLogger


_BUILDERS = {"LightningGpuStatsLogger": _lightning_class, "KerasGpuStatsLogger": _keras_class}
_BUILT: Dict[str, type] = {}


def __getattr__(name):
    builder = _BUILDERS.get(name)
    if builder is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _BUILT:
        _BUILT[name] = builder()
    return _BUILT[name]
