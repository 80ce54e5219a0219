//! Model builders over `nn::Path`: the ResNets (torchvision's layout, built
//! here so that their stages can be reached one by one) and `tinycnn`.
use tch::nn::{self, ModuleT};
use tch::Tensor;

use crate::arch::{self, BlockKind};
use crate::config::{ModelKind, Workload};

/// A model: a module, and for the ResNets their stages one by one
/// (activation checkpointing runs them apart).
pub trait Net: ModuleT {
    /// The ResNet behind it, if it is one.
    fn staged(&self) -> Option<&ResNet> {
        None
    }
}

impl Net for nn::FuncT<'static> {}

impl Net for ResNet {
    fn staged(&self) -> Option<&ResNet> {
        Some(self)
    }
}

pub type Model = Box<dyn Net>;

/// Held by the unit tests that compare models built from one seed:
/// libtorch's generator is global, and two such tests in parallel shift each
/// other's draws (each also retries, for the tests that draw unheld).
#[cfg(test)]
pub(crate) static SEEDED: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Builds the run's model on `device` with its seed, so every replica and
/// rank starts from the same weights; convolution weights go channels-last
/// when the run asks for it.
pub fn build_model(w: &Workload, device: tch::Device) -> (nn::VarStore, Model) {
    tch::manual_seed(w.seed as i64);
    let vs = nn::VarStore::new(device);
    let m = build(&vs.root(), w.model, w.num_classes);
    if w.channels_last {
        for v in vs.variables().values() {
            // Only 4-D weights (convolutions) change layout.
            let _ = crate::ffi::to_channels_last(v);
        }
    }
    (vs, m)
}

pub(crate) fn build(p: &nn::Path, kind: ModelKind, num_classes: i64) -> Model {
    match arch::depth(kind) {
        Some((block, blocks)) => Box::new(ResNet::new(p, block, blocks, num_classes)),
        None => Box::new(tiny_cnn(p, num_classes)),
    }
}

/// A convolution without bias followed by its BatchNorm.
struct ConvBn {
    conv: nn::Conv2D,
    bn: nn::BatchNorm,
}

impl ConvBn {
    fn new(p: &nn::Path, name: (&str, &str), (c_in, c_out): (i64, i64), k: i64, stride: i64) -> ConvBn {
        let cfg = nn::ConvConfig { stride, padding: k / 2, bias: false, ..Default::default() };
        let conv = nn::conv2d(p / name.0, c_in, c_out, k, cfg);
        let bn = nn::batch_norm2d(p / name.1, c_out, Default::default());
        ConvBn { conv, bn }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        xs.apply(&self.conv).apply_t(&self.bn, train)
    }
}

/// One residual block: its convolutions in order, and the projection of its
/// input when the shape changes (torchvision's `downsample`).
struct Block {
    convs: Vec<ConvBn>,
    shortcut: Option<ConvBn>,
}

impl Block {
    /// Variables are made in torchvision's order (conv1, bn1, conv2, …, then
    /// downsample.0 and .1), so a seed draws the same initial weights.
    fn new(p: &nn::Path, kind: BlockKind, c_in: i64, width: i64, stride: i64) -> Block {
        // (in, out, kernel, stride) of each convolution: `arch`'s, which `arch::forward_macs` counts.
        let (shapes, projection) = arch::block_convs(kind, c_in, width, stride);
        let convs = shapes
            .into_iter()
            .enumerate()
            .map(|(i, (a, b, k, s))| {
                let (conv, bn) = (format!("conv{}", i + 1), format!("bn{}", i + 1));
                ConvBn::new(p, (&conv, &bn), (a, b), k, s)
            })
            .collect();
        let shortcut = projection.map(|(a, b, k, s)| ConvBn::new(&(p / "downsample"), ("0", "1"), (a, b), k, s));
        Block { convs, shortcut }
    }

    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let last = self.convs.len() - 1;
        let mut ys = xs.shallow_clone();
        for (i, c) in self.convs.iter().enumerate() {
            ys = c.forward_t(&ys, train);
            if i < last {
                ys = ys.relu();
            }
        }
        let identity = match &self.shortcut {
            Some(s) => s.forward_t(xs, train),
            None => xs.shallow_clone(),
        };
        (identity + ys).relu()
    }
}

/// A torchvision-layout ResNet whose parts can be run one at a time: the
/// stem (conv1, bn1, ReLU, max-pool), four stages (`layer1`..`layer4`),
/// and the head (average pool, `fc`). Its variables have torchvision's
/// names, so checkpoints and the PyTorch side by side line up.
pub struct ResNet {
    stem: ConvBn,
    stages: Vec<Vec<Block>>,
    fc: nn::Linear,
}

impl ResNet {
    pub(crate) fn new(p: &nn::Path, kind: BlockKind, blocks: [i64; 4], num_classes: i64) -> ResNet {
        let (s_in, s_out, s_k, s_stride) = arch::STEM;
        let stem = ConvBn::new(p, ("conv1", "bn1"), (s_in, s_out), s_k, s_stride);
        let mut c_in = s_out;
        let mut stages = vec![];
        for (i, (&n, &width)) in blocks.iter().zip(&arch::WIDTHS).enumerate() {
            let stage = p / format!("layer{}", i + 1);
            let stride = if i == 0 { 1 } else { 2 };
            let mut v = vec![Block::new(&(&stage / "0"), kind, c_in, width, stride)];
            c_in = width * kind.expansion();
            for b in 1..n {
                v.push(Block::new(&(&stage / b.to_string()), kind, c_in, width, 1));
            }
            stages.push(v);
        }
        let fc = nn::linear(p / "fc", c_in, num_classes, Default::default());
        ResNet { stem, stages, fc }
    }

    /// conv1, bn1, ReLU and the 3×3 max-pool.
    pub(crate) fn stem(&self, xs: &Tensor, train: bool) -> Tensor {
        self.stem.forward_t(xs, train).relu().max_pool2d([3, 3], [2, 2], [1, 1], [1, 1], false)
    }

    /// How many stages there are (four).
    pub(crate) fn n_stages(&self) -> usize {
        self.stages.len()
    }

    /// Stage `i` (torchvision's `layer{i+1}`).
    pub(crate) fn stage(&self, i: usize, xs: &Tensor, train: bool) -> Tensor {
        self.stages[i].iter().fold(xs.shallow_clone(), |x, b| b.forward_t(&x, train))
    }

    /// Global average pool and the classifier.
    pub(crate) fn head(&self, xs: &Tensor) -> Tensor {
        xs.adaptive_avg_pool2d([1, 1]).flat_view().apply(&self.fc)
    }
}

impl std::fmt::Debug for ResNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ResNet({} stages)", self.stages.len())
    }
}

impl ModuleT for ResNet {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let x = (0..self.n_stages()).fold(self.stem(xs, train), |x, i| self.stage(i, &x, train));
        self.head(&x)
    }
}

/// A small CNN with no BatchNorm: two strided 3×3 convolutions, global average
/// pooling and a linear classifier. Without BatchNorm, splitting a batch across
/// replicas gives exactly the full-batch gradient, which the dp and ddp
/// equivalence tests rely on; it is also fast enough for smoke runs on a CPU.
pub(crate) fn tiny_cnn(p: &nn::Path, num_classes: i64) -> nn::FuncT<'static> {
    let [(a, b, k, s), (c, d, k2, s2)] = arch::TINY;
    let c1 = nn::conv2d(p / "conv1", a, b, k, nn::ConvConfig { stride: s, padding: k / 2, ..Default::default() });
    let c2 = nn::conv2d(p / "conv2", c, d, k2, nn::ConvConfig { stride: s2, padding: k2 / 2, ..Default::default() });
    let fc = nn::linear(p / "fc", 32, num_classes, Default::default());
    nn::func_t(move |xs, _train| {
        xs.apply(&c1).relu().apply(&c2).relu().adaptive_avg_pool2d([1, 1]).flatten(1, -1).apply(&fc)
    })
}

/// Number of trainable scalars, for the summary.
#[cfg(test)]
pub(crate) fn parameter_count(vs: &nn::VarStore) -> i64 {
    vs.trainable_variables().iter().map(|t| t.numel() as i64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    #[test]
    fn resnet18_matches_torchvision_parameter_count() {
        let vs = nn::VarStore::new(Device::Cpu);
        let _m = build(&vs.root(), ModelKind::Resnet18, 1000);
        assert_eq!(parameter_count(&vs), 11_689_512);
    }

    /// The builder makes torchvision's variables in tch's order: the same
    /// seed gives the same weights, and the same input the same logits.
    #[test]
    fn resnets_equal_tchs_builders_weight_for_weight() {
        for kind in [ModelKind::Resnet18, ModelKind::Resnet50] {
            // The seed is libtorch's global generator, which tests running in
            // parallel draw from too: one of their draws between the seed and
            // the builder shifts every weight after it. A real difference in
            // order fails every attempt; a neighbour's draw almost never twice.
            let _seeded = super::SEEDED.lock().unwrap_or_else(|e| e.into_inner());
            let tries: Vec<String> = (0..4).map_while(|_| same_as_tch(kind).err()).collect();
            assert!(tries.len() < 4, "{kind:?}: {}", tries.join("; "));
        }
    }

    fn same_as_tch(kind: ModelKind) -> Result<(), String> {
        use tch::vision::resnet;
        tch::manual_seed(7);
        let ours_vs = nn::VarStore::new(Device::Cpu);
        let ours = build(&ours_vs.root(), kind, 10);
        tch::manual_seed(7);
        let tch_vs = nn::VarStore::new(Device::Cpu);
        let theirs: Box<dyn ModuleT> = match kind {
            ModelKind::Resnet18 => Box::new(resnet::resnet18(&tch_vs.root(), 10)),
            _ => Box::new(resnet::resnet50(&tch_vs.root(), 10)),
        };
        let (a, b) = (ours_vs.variables(), tch_vs.variables());
        if a.len() != b.len() {
            return Err(format!("variable count {} against {}", a.len(), b.len()));
        }
        if let Some(name) = a.iter().find(|(name, t)| !b.get(*name).is_some_and(|u| t.equal(u))).map(|x| x.0) {
            return Err(format!("{name} differs"));
        }
        tch::manual_seed(1);
        let x = Tensor::randn([2, 3, 64, 64], (Kind::Float, Device::Cpu));
        match ours.forward_t(&x, true).equal(&theirs.forward_t(&x, true)) {
            true => Ok(()),
            false => Err("logits differ".into()),
        }
    }

    #[test]
    fn tiny_cnn_shapes() {
        let vs = nn::VarStore::new(Device::Cpu);
        let m = build(&vs.root(), ModelKind::Tinycnn, 10);
        let y = m.forward_t(&Tensor::zeros([2, 3, 16, 16], (Kind::Float, Device::Cpu)), true);
        assert_eq!(y.size(), vec![2, 10]);
    }
}
