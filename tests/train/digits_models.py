"""The digits models of tests/train/test_train_digits*.sh, shared by the PyTorch reference (digits_ref.py) and
the check that loads tern's trained initializers back into the same module."""
import torch


class Image(torch.nn.Module):
    """The 64 pixels of a row as a 1x8x8 image (a Reshape in the exported model)."""

    def forward(self, x):
        return x.reshape(x.shape[0], 1, 8, 8)


def build(extra):
    nn = torch.nn
    if extra == "gelu-ln":
        return nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 10))
    if extra == "cnn":
        return nn.Sequential(Image(), nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
                             nn.Linear(64, 10))
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))
