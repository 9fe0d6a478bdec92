//! Random-shift image augmentation (DrQ, Kostrikov et al. 2021, §3.1):
//! replicate-pad each image by `pad` pixels and crop a random window of the
//! original size, so each sample is translated by up to ±`pad` pixels.

use rand::Rng;
use tch::Tensor;

/// Shifts each image of a float batch `[B, C, H, W]` by a random offset in `[-pad, pad]²`.
pub fn random_shift(images: &Tensor, pad: i64, rng: &mut impl Rng) -> Tensor {
    if pad == 0 {
        return images.shallow_clone();
    }
    let dims = images.size();
    let (b, h, w) = (dims[0], dims[2], dims[3]);
    let padded = images.replication_pad2d([pad, pad, pad, pad]);
    let crops: Vec<Tensor> = (0..b)
        .map(|i| {
            let (dy, dx) = (rng.random_range(0..=2 * pad), rng.random_range(0..=2 * pad));
            padded.get(i).narrow(1, dy, h).narrow(2, dx, w)
        })
        .collect();
    Tensor::stack(&crops, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use tch::{Device, Kind};

    #[test]
    fn shifts_preserve_shape_and_content() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let images = Tensor::arange(2 * 3 * 8 * 8, (Kind::Float, Device::Cpu)).view([2, 3, 8, 8]);
        let shifted = random_shift(&images, 2, &mut rng);
        assert_eq!(shifted.size(), vec![2, 3, 8, 8]);
        // Every output pixel is some input pixel of the same image and channel.
        let (lo, hi) = (
            images.get(1).get(2).min().double_value(&[]),
            images.get(1).get(2).max().double_value(&[]),
        );
        let out = shifted.get(1).get(2);
        assert!(out.min().double_value(&[]) >= lo && out.max().double_value(&[]) <= hi);
        assert!(random_shift(&images, 0, &mut rng).equal(&images));
    }
}
