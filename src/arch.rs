//! The models' architecture as data: which blocks each ResNet stacks, and
//! the convolutions of a block. `model` builds its networks from these, and
//! `flops` counts their arithmetic from the same definition, torch-free, so
//! that a report can count it for rows of any age.
use crate::config::ModelKind;

/// A ResNet block's kind: two 3×3 convolutions (ResNet-18/34), or the
/// 1×1, 3×3, 1×1 bottleneck that widens its output 4× (ResNet-50 and up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    Basic,
    Bottleneck,
}

impl BlockKind {
    pub fn expansion(self) -> i64 {
        match self {
            BlockKind::Basic => 1,
            BlockKind::Bottleneck => 4,
        }
    }
}

/// One convolution: (in channels, out channels, kernel, stride); padding is kernel / 2.
pub type Conv = (i64, i64, i64, i64);

/// The stem's convolution: 3 → 64 channels, 7×7, stride 2 (then a 3×3 max-pool, stride 2).
pub const STEM: Conv = (3, 64, 7, 2);
/// Each stage's block width; a stage's first block strides 2 except the first stage's.
pub const WIDTHS: [i64; 4] = [64, 128, 256, 512];

/// The block kind and blocks per stage of a ResNet `kind`; None for models
/// that are not ResNets.
pub fn depth(kind: ModelKind) -> Option<(BlockKind, [i64; 4])> {
    Some(match kind {
        ModelKind::Resnet18 => (BlockKind::Basic, [2, 2, 2, 2]),
        ModelKind::Resnet34 => (BlockKind::Basic, [3, 4, 6, 3]),
        ModelKind::Resnet50 => (BlockKind::Bottleneck, [3, 4, 6, 3]),
        ModelKind::Resnet101 => (BlockKind::Bottleneck, [3, 4, 23, 3]),
        ModelKind::Resnet152 => (BlockKind::Bottleneck, [3, 8, 36, 3]),
        ModelKind::Tinycnn => return None,
    })
}

/// A block's main-path convolutions in order, and its shortcut's projection
/// when the shape changes (torchvision's `downsample`).
pub fn block_convs(kind: BlockKind, c_in: i64, width: i64, stride: i64) -> (Vec<Conv>, Option<Conv>) {
    let c_out = width * kind.expansion();
    let main = match kind {
        BlockKind::Basic => vec![(c_in, width, 3, stride), (width, width, 3, 1)],
        BlockKind::Bottleneck => vec![(c_in, width, 1, 1), (width, width, 3, stride), (width, c_out, 1, 1)],
    };
    let shortcut = (stride != 1 || c_in != c_out).then_some((c_in, c_out, 1, stride));
    (main, shortcut)
}

/// tinycnn: two 3×3 stride-2 convolutions (3 → 16 → 32), then the classifier on 32 features.
pub const TINY: [Conv; 2] = [(3, 16, 3, 2), (16, 32, 3, 2)];

/// A convolution's output side for an input side `h` (padding kernel / 2).
fn out_side(h: i64, (_, _, k, s): Conv) -> i64 {
    (h + 2 * (k / 2) - k) / s + 1
}

fn macs(h_out: i64, (c_in, c_out, k, _): Conv) -> u64 {
    (h_out * h_out * c_in * c_out * k * k) as u64
}

/// Multiply-adds of one image's forward pass: every convolution and the
/// classifier (BatchNorm, ReLU, pooling and the residual additions are
/// elementwise and left out, as fvcore and the papers count).
pub fn forward_macs(kind: ModelKind, image_size: i64, num_classes: i64) -> u64 {
    let Some((block, blocks)) = depth(kind) else {
        let mut h = image_size;
        let mut total = 0;
        for c in TINY {
            h = out_side(h, c);
            total += macs(h, c);
        }
        return total + (32 * num_classes) as u64;
    };
    let mut h = out_side(image_size, STEM);
    let mut total = macs(h, STEM);
    h = (h + 2 - 3) / 2 + 1; // the 3×3 max-pool, stride 2, padding 1
    let mut c_in = STEM.1;
    for (i, (&n, &width)) in blocks.iter().zip(&WIDTHS).enumerate() {
        for b in 0..n {
            let stride = if i > 0 && b == 0 { 2 } else { 1 };
            let (main, shortcut) = block_convs(block, c_in, width, stride);
            let h_in = h;
            for c in main {
                h = out_side(h, c);
                total += macs(h, c);
            }
            if let Some(c) = shortcut {
                total += macs(out_side(h_in, c), c);
            }
            c_in = width * block.expansion();
        }
    }
    total + (c_in * num_classes) as u64
}

/// Trainable parameters: every convolution's weights (no bias), each
/// BatchNorm's scale and shift, the classifier's weights and bias. What
/// ddp's gradient all-reduce carries each step.
pub fn param_count(kind: ModelKind, num_classes: i64) -> u64 {
    let conv = |(c_in, c_out, k, _): Conv| (c_in * c_out * k * k) as u64;
    let Some((block, blocks)) = depth(kind) else {
        // tinycnn's convolutions carry a bias and no BatchNorm.
        return TINY.iter().map(|&c| conv(c) + c.1 as u64).sum::<u64>() + (32 * num_classes + num_classes) as u64;
    };
    let bn = |c: i64| 2 * c as u64;
    let mut total = conv(STEM) + bn(STEM.1);
    let mut c_in = STEM.1;
    for (i, (&n, &width)) in blocks.iter().zip(&WIDTHS).enumerate() {
        for b in 0..n {
            let stride = if i > 0 && b == 0 { 2 } else { 1 };
            let (main, shortcut) = block_convs(block, c_in, width, stride);
            total += main.into_iter().chain(shortcut).map(|c| conv(c) + bn(c.1)).sum::<u64>();
            c_in = width * block.expansion();
        }
    }
    total + (c_in * num_classes + num_classes) as u64
}

/// Training FLOPs per image: 2 per multiply-add, and backward twice the
/// forward (gradients of the inputs and of the weights), so 3 × forward.
pub fn train_gflop_per_img(kind: ModelKind, image_size: i64, num_classes: i64) -> f64 {
    3.0 * 2.0 * forward_macs(kind, image_size, num_classes) as f64 / 1e9
}

/// Serving FLOPs per image: the forward pass alone.
pub fn infer_gflop_per_img(kind: ModelKind, image_size: i64, num_classes: i64) -> f64 {
    2.0 * forward_macs(kind, image_size, num_classes) as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ResNet-50 at 224 px: 4.09 G multiply-adds (8.2 GFLOP) forward, as
    /// fvcore and the ResNet paper's "3.8 × 10^9 FLOPs" (multiply-adds,
    /// without the shortcut projections' share) have it; ResNet-18 1.82 G.
    #[test]
    fn resnet_forward_counts_match_the_published_ones() {
        let r50 = forward_macs(ModelKind::Resnet50, 224, 1000) as f64 / 1e9;
        assert!((r50 - 4.09).abs() < 0.02, "{r50}");
        let train = train_gflop_per_img(ModelKind::Resnet50, 224, 1000);
        assert!((train / (3.0 * 8.2) - 1.0).abs() < 0.03, "{train}");
        let r18 = forward_macs(ModelKind::Resnet18, 224, 1000) as f64 / 1e9;
        assert!((r18 - 1.82).abs() < 0.02, "{r18}");
        // Smaller images, quadratically fewer (up to rounding of the sides).
        let r50_112 = forward_macs(ModelKind::Resnet50, 112, 1000) as f64 / 1e9;
        assert!((r50_112 / r50 - 0.25).abs() < 0.02, "{r50_112}");
        // tinycnn at 16 px: 8×8×3×16×9 + 4×4×16×32×9 + 32×10
        assert_eq!(forward_macs(ModelKind::Tinycnn, 16, 10), 27_648 + 73_728 + 320);
    }

    /// torchvision's counts: resnet50 25 557 032 and resnet18 11 689 512 parameters.
    #[test]
    fn parameter_counts_match_torchvision() {
        assert_eq!(param_count(ModelKind::Resnet50, 1000), 25_557_032);
        assert_eq!(param_count(ModelKind::Resnet18, 1000), 11_689_512);
        assert_eq!(param_count(ModelKind::Tinycnn, 10), (3 * 16 * 9 + 16) + (16 * 32 * 9 + 32) + (32 * 10 + 10));
    }
}
