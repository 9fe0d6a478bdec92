//! Synthetic demonstrations for tests and benchmarks, where what the expert
//! does depends on the image, the instruction and the proprioception at once.
//!
//! Each scene shows a red and a blue square on a noisy grey background; the
//! wrist camera sees the same scene mirrored left–right. Task 0 says "move
//! toward the red patch", task 1 "move toward the blue patch". The expert's
//! action is `a0 = ±0.5` (target patch right/left of the image centre),
//! `a1 = ±0.5` (below/above), `a2 = +0.25` for task 0 and `−0.25` for task 1,
//! `a3..a5 = 0`, and the gripper `a6 = +1` if `proprio[0] > 0` else `−1`.
//! Patch centres stay 2 px off the image's centre lines and `|proprio[0]| ≥ 0.5`,
//! so every label is unambiguous. Scenes are static within an episode, so every action of an episode is
//! the same. Without looking at the image, `a0`/`a1` are coin flips.

use image::{Rgb, RgbImage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::demos::{Episode, EpisodeMeta};

/// Instructions of the two synthetic tasks.
pub const INSTRUCTIONS: [&str; 2] = ["move toward the red patch", "move toward the blue patch"];
/// Proprioception values per step (as in the simulator).
pub const PROPRIO_DIM: usize = 15;
/// Values per action.
pub const ACTION_DIM: usize = 7;

/// One synthetic scene.
#[derive(Debug, Clone, PartialEq)]
pub struct Scene {
    /// 0 = go to red, 1 = go to blue.
    pub task: usize,
    /// Top-left corner of the red square.
    pub red: (u32, u32),
    /// Top-left corner of the blue square.
    pub blue: (u32, u32),
    /// Proprioception.
    pub proprio: Vec<f32>,
    /// Seed of the background noise.
    pub noise_seed: u64,
    /// Image side.
    pub size: u32,
}

fn patch_side(size: u32) -> u32 {
    (size / 6).max(2)
}

impl Scene {
    /// A random scene of `task` with patches that do not overlap.
    pub fn random(task: usize, size: u32, rng: &mut impl Rng) -> Self {
        let side = patch_side(size);
        // Patch centres keep 2 px away from the image's centre lines, so every
        // label is unambiguous.
        let coordinate = |rng: &mut dyn rand::RngCore| loop {
            let c = rng.random_range(0..=size - side);
            if (2 * c + side).abs_diff(size) >= 4 {
                break c;
            }
        };
        let corner = |rng: &mut dyn rand::RngCore| (coordinate(rng), coordinate(rng));
        let red = corner(rng);
        let mut blue = corner(rng);
        while red.0.abs_diff(blue.0) < side && red.1.abs_diff(blue.1) < side {
            blue = corner(rng);
        }
        let mut proprio: Vec<f32> = (0..PROPRIO_DIM)
            .map(|_| StandardNormal.sample(rng))
            .collect();
        // The gripper's cue, proprio[0], stays at least 0.5 away from 0.
        proprio[0] = proprio[0].signum() * (0.5 + 0.5 * proprio[0].abs());
        Self {
            task,
            red,
            blue,
            proprio,
            noise_seed: rng.random(),
            size,
        }
    }

    /// The instruction of the scene's task.
    pub fn instruction(&self) -> &'static str {
        INSTRUCTIONS[self.task]
    }

    /// Agent-view and wrist images.
    pub fn render(&self) -> (RgbImage, RgbImage) {
        let mut rng = ChaCha8Rng::seed_from_u64(self.noise_seed);
        let side = patch_side(self.size);
        let mut agent = RgbImage::from_fn(self.size, self.size, |_, _| {
            let g = 110 + rng.random_range(0..30u8);
            Rgb([g, g, g])
        });
        for (corner, colour) in [
            (self.red, Rgb([220, 30, 30])),
            (self.blue, Rgb([30, 60, 220])),
        ] {
            for y in corner.1..corner.1 + side {
                for x in corner.0..corner.0 + side {
                    agent.put_pixel(x, y, colour);
                }
            }
        }
        let wrist = image::imageops::flip_horizontal(&agent);
        (agent, wrist)
    }

    /// The expert's action.
    pub fn expert_action(&self) -> [f32; ACTION_DIM] {
        let half = patch_side(self.size) as f32 / 2.0;
        let target = if self.task == 0 { self.red } else { self.blue };
        let centre = self.size as f32 / 2.0;
        let sign = |v: f32| if v > centre { 0.5 } else { -0.5 };
        [
            sign(target.0 as f32 + half),
            sign(target.1 as f32 + half),
            if self.task == 0 { 0.25 } else { -0.25 },
            0.0,
            0.0,
            0.0,
            if self.proprio[0] > 0.0 { 1.0 } else { -1.0 },
        ]
    }

    /// An episode of `steps` identical expert steps in this scene.
    pub fn episode(&self, steps: usize, state_index: usize) -> Episode {
        let (agent, wrist) = self.render();
        let action = self.expert_action();
        Episode {
            meta: EpisodeMeta {
                suite: "synthetic".into(),
                task_index: self.task,
                task_name: format!("synthetic_{}", self.task),
                instruction: self.instruction().into(),
                state_index,
                success: true,
                source: "synthetic".into(),
                noise_std: 0.0,
                seed: self.noise_seed,
                start_step: 0,
                perturbed_steps: Vec::new(),
            },
            agent_view: vec![agent; steps + 1],
            wrist_view: vec![wrist; steps + 1],
            proprio: self.proprio.repeat(steps + 1),
            proprio_dim: PROPRIO_DIM,
            actions: action.repeat(steps),
            labels: action.repeat(steps),
            action_dim: ACTION_DIM,
        }
    }
}

/// `per_task` successful episodes of each task, `steps` long, images `size`².
pub fn episodes(per_task: usize, steps: usize, size: u32, seed: u64) -> Vec<Episode> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..per_task)
        .flat_map(|i| [0, 1].map(|task| (i, task)))
        .map(|(i, task)| Scene::random(task, size, &mut rng).episode(steps, i))
        .collect()
}
