# FL020 (layer-norm-by-hand): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def cohere_layer_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    variance = (x - mean).pow(2).mean(-1, keepdim=True)
    x = (x - mean) * torch.rsqrt(variance + eps)
    return weight * x

# --- example 2
import torch


def layer_norm_channels_first(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    s, u = torch.var_mean(x, dim=1, unbiased=False, keepdim=True)
    x = (x - u) / torch.sqrt(s + 1e-6)
    return x * weight[:, None, None] + bias[:, None, None]

# --- look-alike 1
import torch


def f(x: torch.Tensor, y: torch.Tensor, eps: float):
    rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    mean = y.mean(-1, keepdim=True)
    var = y.var(-1, keepdim=True)
    target = (y - mean) / (var + 1e-6) ** 0.5
    std = ((y - mean) ** 2).mean(-1, keepdim=True).sqrt()
    scaled = (y - mean) / (std + eps)
    g_mean = x.mean((2, 3), keepdim=True)
    g_var = x.var((2, 3), unbiased=False, keepdim=True)
    grouped = (x - g_mean) * torch.rsqrt(g_var + eps)
    return rms, target, scaled, grouped


def g(x: torch.Tensor, eps: float):
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    x = x * 2
    return (x - mean) * torch.rsqrt(var + eps)

# --- real-code spellings: the biased `var` (a TTS model's norm), the mean inline and the variance
# in the root (xLSTM), a centred name, `.add(eps).sqrt()` and `** -0.5`
import torch


class TTSLayerNorm(torch.nn.Module):
    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        mean = hidden_states.mean(-1, keepdim=True)
        variance = hidden_states.var(-1, unbiased=False, keepdim=True)
        hidden_states = (hidden_states - mean) * torch.rsqrt(variance + self.eps)
        return hidden_states * self.weight + self.bias


def xlstm_layer_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    x_centered = x - x.mean(dim=-1, keepdim=True)
    return x_centered * torch.rsqrt(x.var(dim=-1, keepdim=True, unbiased=False) + eps)


def centred_name(x: torch.Tensor, eps: float):
    mu = torch.mean(x, -1, keepdim=True)
    xc = x - mu
    var = (xc ** 2).mean(-1, keepdim=True)
    return xc / var.add(eps).sqrt(), xc * (var + eps) ** -0.5
