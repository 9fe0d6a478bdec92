//! Trains a tiny network for a few steps on the automatically chosen device
//! (CUDA when present, else CPU) and checks that the loss fell.

use tch::nn::{self, Module, OptimizerConfig};
use tch::{Kind, Tensor};
use wmrl_tch::{DeviceChoice, select_device};

#[test]
fn tiny_regression_learns_on_selected_device() -> anyhow::Result<()> {
    tch::manual_seed(7);
    let device = select_device(DeviceChoice::Auto)?;
    let vs = nn::VarStore::new(device);
    let net = nn::seq()
        .add(nn::linear(vs.root() / "l1", 4, 32, Default::default()))
        .add_fn(|x| x.relu())
        .add(nn::linear(vs.root() / "l2", 32, 1, Default::default()));
    let mut opt = nn::Adam::default().build(&vs, 1e-2)?;
    let x = Tensor::randn([256, 4], (Kind::Float, device));
    let w = Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25])
        .to_device(device)
        .view([4, 1]);
    let y = x.matmul(&w).sin();
    let loss_of = |net: &nn::Sequential| {
        (net.forward(&x) - &y)
            .square()
            .mean(Kind::Float)
            .double_value(&[])
    };
    let before = loss_of(&net);
    for _ in 0..100 {
        let loss = (net.forward(&x) - &y).square().mean(Kind::Float);
        opt.backward_step(&loss);
    }
    let after = loss_of(&net);
    assert!(
        after < 0.2 * before,
        "loss did not fall enough on {device:?}: {before} -> {after}"
    );
    Ok(())
}
