"""The MatchAttention paper's training losses (section 4.3), each term switchable.

All relative-position fields are channel-last ``[N, h, w, 2]`` (x, y) in pixels of their own
grid; both views are stacked on the batch axis (``N = 2B``, reference view first), as
``model.forward_fields`` returns them. Ground truth is the reference-view field
``[B, H, W, 2]`` at full resolution (stereo: ``(-disparity, 0)``) with a validity mask
``[B, H, W]``; a ``[2B, H, W, 2]`` ground truth (both views) also supervises the target view in
``L_init`` and ``L_self``. ``L_cross`` uses reference-view ground truth only.

Terms (``LossConfig`` switches each one on or off):

- ``L_init``, stereo: adaptive multi-modal cross-entropy (ADL, Xu et al., CVPR 2024) between
  the filled softmax volume ``init_cv [2B, D, h, w]`` at 1/32 and a ground-truth distribution
  built per pixel from its ``window x window`` neighbourhood of ground-truth disparities (see
  :func:`adaptive_multimodal_target`). Flow: L1 between the initial field, bilinearly upsampled
  to full resolution, and the ground truth.
- ``L_self`` over the self-attention outputs, the convex-upsampled fields and the final
  full-resolution field (``N + 4`` terms for ``N`` decoder layers), ``L_cross`` over the
  cross-attention outputs (``N`` terms). Term ``i`` of ``n`` has weight ``gamma**(n - 1 - i)``
  (the last, finest term weighs 1). Every field is bilinearly upsampled to full resolution and
  compared with an L1 distance (summed over x, y, averaged over valid pixels per sample,
  then over samples).
- The consistency-constrained cross loss (Eq. 16), per cross field: the L1 term is restricted
  to the running non-occlusion mask ``M_noc`` (Eq. 12): a reference pixel counts as visible when
  ``|F_ref(p) + F_tgt(p + F_ref(p))|_1 < A`` (``A = noc_threshold = 1`` pixel of the field's own
  grid, fields detached), and ``epsilon * |F_ref(p) + F_tgt(p + F_ref(p))|_1`` (the left-right
  consistency, differentiable in both views, ``epsilon = 0.01``) is added over all valid pixels
  whose match lands inside the target view. This is our reading of the paper's Eq. 16; the
  weights and thresholds are configurable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from crossview.errors import UserError
from crossview.geometry.consistency import consistency_error

if TYPE_CHECKING:  # annotations only: the config module needs PyYAML (the [train] extra), the
    # losses do not (test-time adaptation runs them without it)
    from crossview.train.config import LossConfig


def upsample_field(field: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinearly resize a channel-last field ``[N, h, w, 2]`` to ``size = (H, W)``.

    x is multiplied by ``W / w`` and y by ``H / h`` so that values stay in pixels of the new
    grid. ``align_corners=False``: coarse cell ``i`` covers fine pixels ``[f*i, f*i + f)``.
    """
    if field.dim() != 4 or field.shape[-1] != 2:
        raise ValueError(f"field must be [N, h, w, 2]; got {field.shape=}")
    h, w = field.shape[1:3]
    if (h, w) == tuple(size):
        return field
    up = F.interpolate(field.permute(0, 3, 1, 2), size=size, mode="bilinear",
                       align_corners=False).permute(0, 2, 3, 1)
    scale = field.new_tensor([size[1] / w, size[0] / h])
    return up * scale


def downsample_disparity(disp: torch.Tensor, valid: torch.Tensor,
                         factor: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Average valid disparities over ``factor x factor`` blocks, in pixels of the coarse grid.

    Args:
        disp: ``[N, H, W]`` disparity in full-resolution pixels (H, W multiples of ``factor``).
        valid: ``[N, H, W]`` bool.

    Returns:
        ``(disp [N, H/f, W/f] / f, valid [N, H/f, W/f])``; a block is valid when at least half
        of its pixels are.
    """
    if disp.shape != valid.shape or disp.dim() != 3:
        raise ValueError(f"disp and valid must both be [N, H, W]; got {disp.shape=}, "
                         f"{valid.shape=}")
    if disp.shape[1] % factor or disp.shape[2] % factor:
        raise ValueError(f"H and W must be multiples of {factor=}; got {disp.shape=}")
    weight = valid.float()
    total = F.avg_pool2d((disp * weight).unsqueeze(1), factor).squeeze(1)
    frac = F.avg_pool2d(weight.unsqueeze(1), factor).squeeze(1)
    mean = total / frac.clamp_min(1e-6)
    return mean / factor, frac >= 0.5


def adaptive_multimodal_target(disp: torch.Tensor, valid: torch.Tensor, num_bins: int, *,
                               window: int = 3, cluster_eps: float = 1.0, alpha: float = 0.8,
                               scale: float = 0.8) -> torch.Tensor:
    """The ADL ground-truth distribution over disparity bins ``0 .. num_bins - 1``.

    For each pixel, the valid ground-truth disparities of its ``window x window`` neighbourhood
    are clustered in 1D (sorted values split where consecutive values differ by more than
    ``cluster_eps``: DBSCAN with one-point core sets). Each cluster ``k`` with ``n_k`` of the
    ``n`` values is a Laplacian ``exp(-|d - mu_k| / scale)`` normalised over the bins, centred
    at the cluster mean, except the cluster holding the pixel itself, centred at the pixel's own
    disparity. Weights: ``(1 - alpha) * n_k / n``, plus ``alpha`` for the pixel's own cluster.
    Pixels in flat regions therefore get a single Laplacian; pixels at depth edges get one mode
    per surface.

    Args:
        disp: ``[N, h, w]`` ground-truth disparity in bins (pixels of the volume's grid).
        valid: ``[N, h, w]`` bool; invalid pixels get an all-zero target.

    Returns:
        ``[N, num_bins, h, w]`` distributions (rows sum to 1 where ``valid``).
    """
    if disp.shape != valid.shape or disp.dim() != 3:
        raise ValueError(f"disp and valid must both be [N, h, w]; got {disp.shape=}, "
                         f"{valid.shape=}")
    if window % 2 != 1:
        raise ValueError(f"window must be odd; got {window=}")
    n, h, w = disp.shape
    k = window * window
    disp = disp.float()
    big = 1e9  # invalid neighbours sort last and form clusters of weight 0
    values = torch.where(valid, disp, torch.full_like(disp, big))
    values = F.unfold(values.unsqueeze(1), window, padding=window // 2)  # [N, k, h*w]
    pad_mask = F.unfold(torch.ones_like(disp).unsqueeze(1), window, padding=window // 2)
    values = torch.where(pad_mask > 0, values, torch.full_like(values, big))
    sorted_vals, order = values.sort(dim=1)
    is_valid = sorted_vals < big / 2
    gaps = (sorted_vals[:, 1:] - sorted_vals[:, :-1]) > cluster_eps
    cluster = torch.cat([torch.zeros_like(gaps[:, :1], dtype=torch.long),
                         gaps.long().cumsum(dim=1)], dim=1)  # [N, k, L]
    onehot = F.one_hot(cluster, k).float() * is_valid.unsqueeze(-1)  # [N, k(val), L, k(cl)]
    counts = onehot.sum(dim=1)  # [N, L, K]
    sums = (onehot * torch.where(is_valid, sorted_vals, 0.0).unsqueeze(-1)).sum(dim=1)
    means = sums / counts.clamp_min(1.0)
    centre_pos = (order == k // 2).float().argmax(dim=1)  # [N, L], where the pixel itself sorted
    centre_cluster = cluster.gather(1, centre_pos.unsqueeze(1)).squeeze(1)  # [N, L]
    own = F.one_hot(centre_cluster, k).float()  # [N, L, K]
    centre_value = disp.reshape(n, 1, h * w).squeeze(1).unsqueeze(-1)  # [N, L, 1]
    means = torch.where(own > 0, centre_value, means)
    total = counts.sum(dim=-1, keepdim=True).clamp_min(1.0)
    weights = (1 - alpha) * counts / total + alpha * own  # [N, L, K]
    bins = torch.arange(num_bins, dtype=disp.dtype, device=disp.device)
    logits = -(bins.view(1, 1, 1, -1) - means.unsqueeze(-1)).abs() / scale  # [N, L, K, D]
    target = (weights.unsqueeze(-1) * logits.softmax(dim=-1)).sum(dim=2)  # [N, L, D]
    target = target * valid.reshape(n, h * w, 1)
    return target.permute(0, 2, 1).reshape(n, num_bins, h, w)


def adaptive_multimodal_ce(volume: torch.Tensor, disp: torch.Tensor, valid: torch.Tensor, *,
                           window: int = 3, cluster_eps: float = 1.0, alpha: float = 0.8,
                           scale: float = 0.8) -> torch.Tensor:
    """Cross-entropy between a softmax disparity volume and the ADL target distribution.

    Args:
        volume: ``[N, D, h, w]`` probabilities over disparities ``0 .. D-1`` (already softmaxed
            and filled, as the model's ``init_cv``).
        disp: ``[N, h, w]`` ground-truth disparity in bins; values outside ``[0, D-1]`` are
            ignored.
        valid: ``[N, h, w]`` bool.

    Returns:
        Scalar: ``-sum_d target(d) log volume(d)`` averaged over valid pixels (0 if none).
    """
    if volume.dim() != 4 or volume.shape[0:1] + volume.shape[2:] != disp.shape:
        raise ValueError(f"volume must be [N, D, h, w] matching disp [N, h, w]; got "
                         f"{volume.shape=}, {disp.shape=}")
    num_bins = volume.shape[1]
    valid = valid & (disp >= 0) & (disp <= num_bins - 1)
    target = adaptive_multimodal_target(disp, valid, num_bins, window=window,
                                        cluster_eps=cluster_eps, alpha=alpha, scale=scale)
    per_pixel = -(target * volume.float().clamp_min(1e-8).log()).sum(dim=1)
    return masked_mean(per_pixel, valid)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sample mean of ``values [N, ...]`` where ``mask`` holds, then the mean over samples.

    Values outside the mask (even NaN or inf) are ignored; a sample without a masked pixel
    contributes 0. Averaging per sample first makes a batch split over ranks (DDP averages the
    ranks' gradients) compute exactly the loss of the whole batch.
    """
    picked = torch.where(mask, values, torch.zeros((), dtype=values.dtype))
    total = picked.flatten(1).sum(dim=1)
    count = mask.flatten(1).sum(dim=1).clamp_min(1).to(values.dtype)
    return (total / count).mean()


def reference_consistency(field: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-right consistency of both views' fields ``[2B, h, w, 2]`` for the reference view:
    :func:`crossview.geometry.consistency.consistency_error` of its first ``B`` rows.

    Returns ``(|F_ref(p) + F_tgt(p + F_ref(p))|_1 [B, h, w], inside [B, h, w])``.
    """
    if field.dim() != 4 or field.shape[0] % 2 or field.shape[-1] != 2:
        raise ValueError(f"field must be [2B, h, w, 2] (both views); got {field.shape=}")
    error, inside = consistency_error(field)
    batch = field.shape[0] // 2
    return error[:batch], inside[:batch]


def training_noc_mask(field: torch.Tensor, threshold: float = 1.0) -> torch.Tensor:
    """Eq. 12 for the loss: reference pixels whose match lands inside the target view and is
    left-right consistent within ``threshold``.

    ``field [2B, h, w, 2]`` (detached here) -> ``[B, h, w]`` bool. Unlike the model's own mask
    (:func:`crossview.geometry.consistency.noc_mask`, which follows the published network), a
    match outside the target view never counts as visible: there is nothing to supervise it by.
    """
    error, inside = reference_consistency(field.detach().float())
    return (error < threshold) & inside


def discount_weights(count: int, gamma: float) -> list[float]:
    """``[gamma**(count-1), ..., gamma, 1]``: later (finer) terms weigh more."""
    return [gamma ** (count - 1 - i) for i in range(count)]


def field_l1(pred: torch.Tensor, gt: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean over valid pixels of ``|pred - gt|_1``, ``pred`` upsampled to ``gt``'s size.

    ``pred [N, h, w, 2]``, ``gt [N, H, W, 2]``, ``valid [N, H, W]`` -> scalar.
    """
    up = upsample_field(pred.float(), tuple(gt.shape[1:3]))
    return masked_mean((up - gt).abs().sum(dim=-1), valid)


def _views(gt: torch.Tensor, valid: torch.Tensor, field_batch: int
           ) -> tuple[torch.Tensor, torch.Tensor, slice]:
    """Ground truth rows and the matching slice of a ``[2B, ...]`` prediction."""
    if gt.shape[0] == field_batch:
        return gt, valid, slice(0, field_batch)
    if 2 * gt.shape[0] == field_batch:
        return gt, valid, slice(0, gt.shape[0])
    raise ValueError(f"ground truth must cover the reference view ([B, H, W, 2]) or both "
                     f"views ([2B, H, W, 2]) of a [2B, ...] prediction; got {gt.shape=}, "
                     f"prediction batch {field_batch}")


def init_loss(outputs: dict, gt: torch.Tensor, valid: torch.Tensor, task: str,
              cfg: LossConfig) -> torch.Tensor:
    """``L_init``: ADL cross-entropy on ``init_cv`` (stereo) or L1 on ``init_field`` (flow)."""
    init_field = outputs["init_field"]
    gt_v, valid_v, rows = _views(gt, valid, init_field.shape[0])
    if task == "flow":
        return field_l1(init_field[rows], gt_v, valid_v)
    volume = outputs["init_cv"][rows]
    factor = gt.shape[2] // volume.shape[3]
    # reference rows hold (-d, 0), target rows (+d, 0): disparity is |x|
    disp_lr, valid_lr = downsample_disparity(gt_v[..., 0].abs(), valid_v, factor)
    return adaptive_multimodal_ce(volume, disp_lr, valid_lr, window=cfg.adl_window,
                                  cluster_eps=cfg.adl_cluster_eps, alpha=cfg.adl_alpha,
                                  scale=cfg.adl_scale)


def self_loss(outputs: dict, gt: torch.Tensor, valid: torch.Tensor,
              cfg: LossConfig) -> torch.Tensor:
    """``L_self``: discounted L1 over self fields, upsampled fields and the final field."""
    fields = [f for f, kind in zip(outputs.get("fields", []), outputs.get("field_kinds", []),
                                   strict=True) if kind in ("self", "up")]
    fields.append(outputs["field"])
    gt_v, valid_v, rows = _views(gt, valid, fields[-1].shape[0])
    weights = discount_weights(len(fields), cfg.gamma)
    return sum(wt * field_l1(f[rows], gt_v, valid_v) for wt, f in zip(weights, fields,
                                                                     strict=True))


def cross_loss(outputs: dict, gt: torch.Tensor, valid: torch.Tensor,
               cfg: LossConfig) -> torch.Tensor:
    """``L_cross`` with the consistency constraint (Eq. 16), reference-view ground truth only."""
    fields = [f for f, kind in zip(outputs["fields"], outputs["field_kinds"], strict=True)
              if kind == "cross"]
    if not fields:
        raise ValueError("outputs hold no 'cross' field; cannot compute L_cross")
    batch = fields[0].shape[0] // 2
    gt_ref, valid_ref = gt[:batch], valid[:batch]
    weights = discount_weights(len(fields), cfg.gamma)
    total = gt.new_zeros(())
    for wt, f in zip(weights, fields, strict=True):
        total = total + wt * consistency_constrained_l1(f, gt_ref, valid_ref, cfg)
    return total


def consistency_constrained_l1(field: torch.Tensor, gt: torch.Tensor, valid: torch.Tensor,
                               cfg: LossConfig) -> torch.Tensor:
    """Eq. 16 for one cross field ``[2B, h, w, 2]`` against reference ground truth ``[B, H, W, 2]``.

    ``L1`` restricted to ``M_noc`` (when ``cfg.noc_mask``) plus ``cfg.consistency_eps`` times
    the mean left-right consistency error (at the field's own resolution, in full-resolution
    pixels).
    """
    batch = gt.shape[0]
    size = tuple(gt.shape[1:3])
    field = field.float()
    ref = field[:batch]
    mask = valid
    if cfg.noc_mask:
        noc = training_noc_mask(field, cfg.noc_threshold)
        noc_full = F.interpolate(noc.float().unsqueeze(1), size=size, mode="nearest")
        mask = valid & (noc_full.squeeze(1) > 0)
    loss = field_l1(ref, gt, mask)
    if cfg.consistency_eps > 0:
        error, inside = reference_consistency(field)
        factor = size[1] / field.shape[2]
        valid_lr = F.adaptive_max_pool2d(valid.float().unsqueeze(1),
                                         tuple(field.shape[1:3])).squeeze(1) > 0
        loss = loss + cfg.consistency_eps * factor * masked_mean(error, inside & valid_lr)
    return loss


def training_loss(outputs: dict, gt: torch.Tensor, valid: torch.Tensor, task: str,
                  cfg: LossConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """The weighted sum of the enabled terms, and each term's value for logging.

    Args:
        outputs: ``model.forward_fields(...)`` in train mode: ``field``, and what the enabled
            terms read (``init``: ``init_field``, ``init_cv`` for stereo; ``cross``:
            ``fields``, ``field_kinds``; ``self`` reads them where present); a term whose
            outputs are missing is a :class:`UserError`.
        gt: ``[B, H, W, 2]`` (reference view) or ``[2B, H, W, 2]`` (both views) ground-truth
            field at the input resolution.
        valid: ``[B or 2B, H, W]`` bool.
        task: ``"stereo"`` or ``"flow"``.

    Returns:
        ``(total, {"loss": .., "init": .., "self": .., "cross": ..})`` (disabled terms absent).
    """
    if task not in ("stereo", "flow"):
        raise ValueError(f"task must be 'stereo' or 'flow'; got {task!r}")
    if gt.dim() != 4 or gt.shape[-1] != 2 or valid.shape != gt.shape[:3]:
        raise ValueError(f"gt must be [N, H, W, 2] and valid [N, H, W]; got {gt.shape=}, "
                         f"{valid.shape=}")
    for term, key in (("init", "init_field"), ("cross", "fields")):
        if getattr(cfg, f"{term}_weight") > 0 and key not in outputs:
            raise UserError(f"config: loss.{term}_weight needs the network's {key} output, "
                            f"which this model's forward_fields does not return; set "
                            f"loss.{term}_weight: 0")
    gt = gt.float()
    valid = valid.bool()
    terms: dict[str, torch.Tensor] = {}
    if cfg.init_weight > 0:
        terms["init"] = cfg.init_weight * init_loss(outputs, gt, valid, task, cfg)
    if cfg.self_weight > 0:
        terms["self"] = cfg.self_weight * self_loss(outputs, gt, valid, cfg)
    if cfg.cross_weight > 0:
        terms["cross"] = cfg.cross_weight * cross_loss(outputs, gt, valid, cfg)
    if not terms:
        raise ValueError("every loss term is switched off (init_weight, self_weight, "
                         "cross_weight are all 0)")
    total = sum(terms.values())
    logs = {name: float(value.detach()) for name, value in terms.items()}
    logs["loss"] = float(total.detach())
    return total, logs
