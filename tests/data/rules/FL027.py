# FL027 (log-by-hand): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def inverse_sigmoid(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    x = x.clamp(min=0, max=1)
    x1 = x.clamp(min=eps)
    x2 = (1 - x).clamp(min=eps)
    return torch.log(x1 / x2)

# --- example 2
import torch


def biased_logits_and_entropy(logits: torch.Tensor, anchors: torch.Tensor):
    logits = logits + logits.sigmoid().log()
    prob = logits.softmax(dim=-1)
    entropy = -(prob * torch.log(prob)).sum(dim=-1)
    return logits, entropy, torch.log(anchors / (1 - anchors))

# --- look-alike 1
import torch


def f(x: torch.Tensor, y: torch.Tensor, p: torch.Tensor, q: torch.Tensor, eps: float):
    a = -torch.log(torch.sigmoid(x) + eps)
    b = torch.log(x / (1 - y))
    c = p * torch.log(p + eps)
    d = p * torch.log(q)
    return a, b, c, d, torch.log(x) - torch.log(1 - y)

# --- real-code spellings: RT-DETR's inverse sigmoid through `clip` and inline clamps, Gumbel noise's
# logit of a uniform draw, a binary entropy and an entropy summed whole; look-alikes: the log of
# a sigmoid plus an eps, a clamp that is not to [0, 1]
import torch


def inverse_sigmoid(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    out = x.clip(min=0.0, max=1.0)
    return torch.log(out.clip(min=eps) / (1.0 - out).clip(min=eps))


def spellings(u: torch.Tensor, logits: torch.Tensor, masked: torch.Tensor, p_x: torch.Tensor, beta: float):
    noisy = (torch.log(u) - torch.log1p(-u) + logits) / beta
    mask_ent = -masked * masked.log() - (1 - masked) * (1 - masked).log()
    s_x = -torch.sum(p_x * torch.log(p_x))
    return noisy, mask_ent, s_x


def look_alikes(x: torch.Tensor, eps: float):
    pos_loss = -torch.log(torch.sigmoid(x) + eps).mean()
    y = x.clamp(min=-1, max=1)
    return pos_loss, torch.log(y.clamp(min=eps) / (1 - y).clamp(min=eps))
