# FL006 (compute-bound-sequence): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch
import torch.nn.functional as F


def two_branches(img: torch.Tensor, other: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    a = img * 2
    c1 = F.conv2d(a, k1, padding=1)
    g = other + 1
    c2 = F.conv2d(g, k2, padding=1)
    return c1 + c2

# --- example 2
import torch
import torch.nn.functional as F


def towers(img: torch.Tensor, other: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    c1 = F.conv2d(img, k1, padding=1)
    o1 = torch.sigmoid(c1)
    c2 = F.conv2d(other, k2, padding=1)
    return o1 + c2

# --- look-alike 1
import torch
import torch.nn.functional as F


def towers(img: torch.Tensor, other: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    c1 = F.conv2d(img, k1, padding=1)
    o1 = torch.relu(c1)
    c2 = F.conv2d(other, k2, padding=1)
    return o1 + c2

# --- look-alike 2
import torch
import torch.nn.functional as F


def stack(x: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor) -> torch.Tensor:
    h = F.conv2d(x, k1, padding=1)
    h = F.relu(h)
    return F.conv2d(h, k2, padding=1)

# --- look-alike 3
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    c1 = F.conv2d(x, k1)
    g = y + 1
    c2 = F.conv2d(g, k2)
    return c1, c2

# --- look-alike 4
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor, b: torch.Tensor):
    a = x * 2
    c1 = F.conv2d(a, k1) + b
    g = y + 1
    c2 = F.conv2d(g, k2)
    return c1 + c2

# --- look-alike 5
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    a = x * 2
    c1 = F.conv2d(a, k1)
    g = y + 1
    c2 = F.conv2d(g * g, k2)
    return c1 + c2

# --- look-alike 6
import torch


def f(x: torch.Tensor, y: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    a = x * 3
    h1 = a @ w1
    g = y * 2
    h2 = g @ w2
    return h1 + h2

# --- look-alike 7
import torch


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    s1 = x.sum(-1, keepdim=True)
    a = y * 2
    s2 = a.amax(-1, keepdim=True)
    return s1 + s2

# --- look-alike 8
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor, norm):
    a = x * 2
    c1 = F.conv2d(a, k1)
    g = norm(y)
    c2 = F.conv2d(g, k2)
    return c1 + c2

# --- look-alike 9
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    a = x * 2
    c1 = F.conv2d(a, k1)
    g = y + 1
    g.clamp_(min=0)
    c2 = F.conv2d(g, k2)
    return c1 + c2

# --- look-alike 10
import torch
import torch.nn.functional as F


def f(x: torch.Tensor, y: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor):
    a = x * 2
    b = y * 3
    c1 = F.conv2d(a, k1)
    g = a * b
    c2 = F.conv2d(g, k2)
    return c1 + c2

# --- look-alike 11
import numpy as np
from scipy.signal import convolve2d as conv2d
import torch


def f(x: np.ndarray, y: np.ndarray, k: np.ndarray):
    a = x * 2
    c1 = conv2d(a, k)
    g = y + 1
    c2 = conv2d(g, k)
    return c1 + c2
