//! Strategy correctness on the CPU: dp with several replicas must compute the
//! same gradients and parameters as one device on the whole global batch (with
//! the BatchNorm-free model, where splitting a batch changes nothing).
use super::common::{run_config, TINY};
use gpubench::bench::placement::Seat;
use gpubench::config::RunConfig;
use gpubench::data::{synthetic::Synthetic, Batch, DataSource};
use gpubench::device::Devices;
use gpubench::strategy::{dp::DataParallel, single::Single, Strategy};
use tch::Tensor;

fn cfg(args: &str, devices: Devices) -> RunConfig {
    run_config(args, Seat::Local(devices))
}

fn grads(s: &dyn Strategy) -> Vec<Tensor> {
    s.var_store().trainable_variables().iter().map(|v| v.grad().copy()).collect()
}

fn params(s: &dyn Strategy) -> Vec<Tensor> {
    s.var_store().trainable_variables().iter().map(|v| v.detach().copy()).collect()
}

/// Largest relative difference ‖a−b‖ / ‖b‖ over the tensors (float32
/// summation order differs between one batch and chunks, so elementwise
/// comparisons of near-zero entries would only measure rounding).
fn max_rel(a: &[Tensor], b: &[Tensor]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let d = (x - y).norm().double_value(&[]);
            let n = y.norm().double_value(&[]);
            if n == 0.0 {
                d
            } else {
                d / n
            }
        })
        .fold(0.0, f64::max)
}

fn dp_matches_single(replicas: usize) {
    let per_device = 4;
    let global = per_device * replicas as i64;
    let opts = format!("{TINY} --lr 0.05");
    let dcfg = cfg(&format!("--strategy dp --batch-size {per_device} {opts}"), Devices::cpu(replicas));
    // single on the whole global batch, with dp's learning rate
    let scfg = cfg(&format!("--strategy single --batch-size {global} {opts}"), Devices::cpu(1));
    let mut dp = DataParallel::new(&dcfg).unwrap();
    let mut single = Single::new(&scfg).unwrap();
    assert_eq!(dp.input_batch(), global);
    assert_eq!(max_rel(&params(&dp), &params(&single)), 0.0, "same seed, same initial weights");

    let mut data = Synthetic::new(global, 16, 10, tch::Device::Cpu, 3).unwrap();
    let batches: Vec<Batch> = (0..3).map(|_| data.next_batch().unwrap()).collect();
    for (i, b) in batches.iter().enumerate() {
        let l_dp = dp.step(b).unwrap().double_value(&[]);
        let l_single = single.step(b).unwrap().double_value(&[]);
        assert!((l_dp - l_single).abs() <= 1e-5 * l_single.abs(), "step {i}: loss {l_dp} vs {l_single}");
        if i == 0 {
            let e = max_rel(&grads(&dp), &grads(&single));
            assert!(e < 1e-5, "{replicas} replicas: step-0 gradients differ by {e:e} relative");
        }
    }
    let e = max_rel(&params(&dp), &params(&single));
    assert!(e < 1e-5, "{replicas} replicas: parameters after 3 steps differ by {e:e} relative");
}

#[test]
fn dp_one_replica_equals_single() {
    // One device takes PyTorch's shortcut (no replica thread): still the same maths.
    dp_matches_single(1);
}

#[test]
fn dp_two_replicas_equals_single_on_the_global_batch() {
    dp_matches_single(2);
}

#[test]
fn dp_four_replicas_equals_single_on_the_global_batch() {
    dp_matches_single(4);
}

#[test]
fn dp_resnet18_train_mode_loss_falls_on_a_fixed_batch() {
    let c = cfg(
        "--strategy dp --model resnet18 --image-size 32 --batch-size 4 --num-classes 10 --lr 0.05",
        Devices::cpu(2),
    );
    let mut dp = DataParallel::new(&c).unwrap();
    let b = Synthetic::new(8, 32, 10, tch::Device::Cpu, 5).unwrap().next_batch().unwrap();
    let losses: Vec<f64> = (0..24).map(|_| dp.step(&b).unwrap().double_value(&[])).collect();
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    let first: f64 = losses[..3].iter().sum::<f64>() / 3.0;
    let last: f64 = losses[losses.len() - 3..].iter().sum::<f64>() / 3.0;
    assert!(last < 0.5 * first, "loss did not fall: {first} → {last}");
}

/// `--checkpoint` drops each ResNet stage's activations and recomputes them
/// in backward: the losses, gradients and weights are those of the run
/// without it (float tolerance), over several steps; BatchNorm's running
/// statistics are the one thing that moves twice.
#[test]
fn checkpointing_gives_the_gradients_and_losses_of_the_plain_run() {
    let base = "--model resnet18 --image-size 32 --num-classes 10 --batch-size 4 --lr 0.05";
    let mut plain = Single::new(&cfg(base, Devices::cpu(1))).unwrap();
    let mut ckpt = Single::new(&cfg(&format!("{base} --checkpoint"), Devices::cpu(1))).unwrap();
    assert_eq!(max_rel(&params(&ckpt), &params(&plain)), 0.0, "same seed, same start");
    let mut data = Synthetic::new(4, 32, 10, tch::Device::Cpu, 5).unwrap();
    for step in 0..3 {
        let b = data.next_batch().unwrap();
        let lp = plain.step(&b).unwrap().double_value(&[]);
        let lc = ckpt.step(&b).unwrap().double_value(&[]);
        assert!((lp - lc).abs() <= 1e-5 * lp.abs().max(1.0), "step {step}: loss {lc} vs {lp}");
        let e = max_rel(&grads(&ckpt), &grads(&plain));
        assert!(e < 1e-4, "step {step}: gradients differ by {e:e} relative");
    }
    let e = max_rel(&params(&ckpt), &params(&plain));
    assert!(e < 1e-4, "weights after 3 steps differ by {e:e} relative");
    // The stem and the stages really ran twice: their BatchNorm statistics
    // moved twice a step.
    let stat = |s: &Single, name: &str| s.var_store().variables()[name].copy();
    for bn in ["bn1.running_mean", "layer2.0.bn1.running_mean", "layer4.1.bn2.running_var"] {
        assert!(!stat(&ckpt, bn).allclose(&stat(&plain, bn), 1e-6, 1e-7, false), "no recompute of {bn}");
    }
}
