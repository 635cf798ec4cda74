# FL021 (softmax-by-hand): its examples, flagged, then its look-alikes, not flagged.

# --- example 1
import torch


def local_attention_probs(query_key_dots: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    logits = torch.logsumexp(query_key_dots, dim=-1, keepdim=True)
    attention_probs = torch.exp(query_key_dots - logits)
    return attention_probs @ values

# --- example 2
import torch


def log_probs_and_weights(logits: torch.Tensor, scores: torch.Tensor):
    log_probs = logits - logits.logsumexp(-1, keepdim=True)
    e = scores.exp()
    return log_probs, e / e.sum(dim=-1, keepdim=True)

# --- look-alike 1
import torch


def f(log_mu: torch.Tensor, scores: torch.Tensor, log_v: torch.Tensor, x: torch.Tensor):
    log_u = log_mu - torch.logsumexp(scores + log_v.unsqueeze(1), dim=2)
    z = x - x.logsumexp(-1)
    lse = torch.logsumexp(x, dim=-1, keepdim=True)
    probs = torch.exp(x - lse)
    e = torch.exp(x)
    normalised = x / x.sum(-1, keepdim=True)
    other = e / e.sum(-1)
    return log_u, z, probs, lse, normalised, other

# --- real-code spellings: a hash combination (the log-sum-exp inline; over dim 2, not flagged), a router's
# top-k weights, `torch.sum` of an inline exponential, and a softmax of a shifted input
import torch
import torch.nn.functional as F


def combine_hashes(logits: torch.Tensor, out_vectors: torch.Tensor, topk_logits: torch.Tensor):
    probs_vectors = torch.exp(logits - torch.logsumexp(logits, dim=2, keepdim=True))
    out_vectors = torch.sum(out_vectors * probs_vectors, dim=2)
    topk_log_probs = F.logsigmoid(topk_logits)
    topk_weights = torch.exp(topk_log_probs - torch.logsumexp(topk_log_probs, dim=-1, keepdim=True))
    shifted = torch.exp(logits - logits.amax(-1, keepdim=True)) / torch.sum(torch.exp(logits - logits.amax(-1, keepdim=True)), -1, keepdim=True)
    return out_vectors, topk_weights, shifted
