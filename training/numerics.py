"""Number formats for training, measured with torch's own casts rather than quoted, and the two
estimators the dedup stage relies on (MinHash Jaccard, LSH banding)."""
from __future__ import annotations

import numpy as np
import torch

FORMATS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
           "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
MANTISSA_BITS = {"fp32": 23, "bf16": 7, "fp16": 10, "fp8_e4m3": 3, "fp8_e5m2": 2}  # stored fraction bits


def format_table() -> list[dict[str, float]]:
    """Max, smallest normal, smallest subnormal and machine epsilon (gap above 1.0) of each format."""
    rows = []
    for name, dtype in FORMATS.items():
        info = torch.finfo(dtype)
        rows.append({"format": name, "bits": info.bits, "max": float(info.max), "smallest_normal": float(info.tiny),
                     "smallest_subnormal": float(info.tiny) * 2.0 ** -MANTISSA_BITS[name],
                     "epsilon": float(info.eps)})
    return rows


def gradient_underflow(samples: int = 1_000_000, center: float = 1e-6, sigma_decades: float = 1.0,
                       loss_scales=(1.0, 1024.0, 65536.0), seed: int = 0) -> dict[str, object]:
    """Share of simulated gradients that become exactly 0 when cast to fp16 (and bf16), without and
    with loss scaling. Gradients: |g| log-normal with log10|g| ~ Normal(log10(center), sigma_decades),
    random sign, the typical spread of per-element gradients in a large model."""
    rng = np.random.default_rng(seed)
    magnitude = 10.0 ** rng.normal(np.log10(center), sigma_decades, samples)
    grads = torch.from_numpy(magnitude * rng.choice([-1.0, 1.0], samples)).float()
    out = {"distribution": f"|g| = 10^N(log10 {center:g}, {sigma_decades:g}), random sign, n={samples:,}"}
    for scale in loss_scales:
        for name in ("fp16", "bf16"):
            cast = (grads * scale).to(FORMATS[name])
            out[f"{name}_zero_share_scale_{scale:g}"] = float((cast == 0).float().mean())
    return out


def swamping() -> dict[str, float]:
    """An update smaller than half an ulp vanishes: 1.0 + 1e-3 in bf16 (ulp 2^-7 = 0.0078) is 1.0."""
    one = torch.tensor(1.0)
    return {f"{name}: 1.0 + 1e-3": float(one.to(dtype) + torch.tensor(1e-3).to(dtype))
            for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16))}


def minhash_error(ks=(16, 64, 128, 256), jaccards=(0.2, 0.5, 0.8), trials: int = 200, seed: int = 0) -> list[dict]:
    """Standard deviation of the MinHash estimate of J over random set pairs, next to the binomial
    prediction sqrt(J(1-J)/k) (each of the k minima agrees with probability J)."""
    from datasketch import MinHash

    rng = np.random.default_rng(seed)
    rows = []
    for j in jaccards:
        union = 400
        shared = int(round(j * union))
        for k in ks:
            estimates = []
            for t in range(trials):
                ids = rng.choice(10**9, size=union, replace=False)
                a, b = ids[:shared + (union - shared) // 2], np.concatenate([ids[:shared], ids[shared + (union - shared) // 2:]])
                ma, mb = MinHash(num_perm=k, seed=t), MinHash(num_perm=k, seed=t)
                ma.update_batch([str(x).encode() for x in a])
                mb.update_batch([str(x).encode() for x in b])
                estimates.append(ma.jaccard(mb))
            true_j = shared / union
            rows.append({"jaccard": true_j, "k": k, "measured_std": float(np.std(estimates)),
                         "predicted_std": float(np.sqrt(true_j * (1 - true_j) / k)),
                         "mean_estimate": float(np.mean(estimates))})
    return rows


def lsh_s_curve(bands: int, rows: int, points: int = 21) -> list[dict[str, float]]:
    """P(candidate pair) = 1 - (1 - J^r)^b for b bands of r rows (Leskovec et al., MMDS ch. 3)."""
    return [{"jaccard": j, "p_candidate": 1 - (1 - j ** rows) ** bands}
            for j in np.linspace(0.0, 1.0, points).tolist()]
