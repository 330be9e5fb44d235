"""The digits models of tests/train/test_train_digits*.sh, shared by the PyTorch reference (digits_ref.py) and
the check that loads tern's trained initializers back into the same module."""
import numpy as np
import torch


class Image(torch.nn.Module):
    """The 64 pixels of a row as a 1x8x8 image (a Reshape in the exported model)."""

    def forward(self, x):
        return x.reshape(x.shape[0], 1, 8, 8)


class MaskDropout(torch.nn.Module):
    """Dropout with a given mask (kept elements already scaled by 1 / (1 - p)): the reference applies tern's masks."""

    def __init__(self):
        super().__init__()
        self.mask = None

    def forward(self, x):
        return x * self.mask


def tern_dropout_mask(seed, step, k, ratio, count):
    """tern's Dropout mask (train_dropout_mask in src/train/train_internal.h): splitmix64 draws from
    seed ^ step * 0xD1B54A32D192ED03 ^ (k + 1) * 0x8CB92BA72F3D8DD7, kept when (z >> 11) * 2^-53 >= ratio."""
    m = (1 << 64) - 1
    s0 = (seed ^ (step * 0xD1B54A32D192ED03 & m) ^ ((k + 1) * 0x8CB92BA72F3D8DD7 & m)) & m
    with np.errstate(over="ignore"):
        z = np.uint64(s0) + np.arange(1, count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    return np.where(u >= ratio, np.float32(1.0 / (1.0 - ratio)), np.float32(0.0)).astype(np.float32)


def build(extra):
    nn = torch.nn
    if extra == "gelu-ln":
        return nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 10))
    if extra == "dropout":
        return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 10))
    if extra == "cnn-bn":  # BatchNorm (training mode), a strided depthwise conv, padded pooling (test_train_digits_bn.sh)
        return nn.Sequential(Image(), nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False),
                             nn.MaxPool2d(3, stride=2, padding=1), nn.Flatten(), nn.Linear(32, 10))
    if extra == "cnn":
        return nn.Sequential(Image(), nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                             nn.Linear(64, 10))
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))
