//! Loading a folder of demonstrations into memory for behaviour cloning.
//!
//! Every `*.demo` file under the folder is read and checked (in parallel); any
//! corrupt or truncated file stops the load with its name. Only successful
//! episodes are used for cloning; every task present (or listed in the
//! folder's `manifest.json`) must have at least one. Per task a fraction of
//! the successful episodes is held out, whole, for validation.
//!
//! Frames are resized once, to the model's input size, and kept as `u8`. The
//! target of observation `t` is the chunk of labels `a_t … a_{t+C-1}` as tokens
//! (the demonstrator's intended actions); slots past the episode's end repeat the last
//! label and are masked out of the loss, and so are the slots after a
//! perturbation burst (`perturbed_steps`: the labels from there on react to a
//! push that observation `t` cannot foresee; slot 0 always counts).

use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;
use tch::{Device, Kind, Tensor};

use crate::binning::ActionBinning;
use crate::demos::format::{EXTENSION, Episode, read_episode};
use crate::demos::manifest::{MANIFEST_FILE, Manifest};
use crate::inference::images_to_tensor;
use crate::model::resize_images;
use crate::{Error, Result};

/// What the model needs from the data.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetOptions {
    /// Square side frames are resized to (the model's `image_size`).
    pub image_size: i64,
    /// Action-chunk length.
    pub chunk_len: i64,
    /// Values per action the model emits.
    pub action_dim: usize,
    /// Values per proprioception row the model reads.
    pub proprio_dim: usize,
    /// Action discretisation.
    pub binning: ActionBinning,
    /// Fraction of each task's successful episodes held out.
    pub val_fraction: f64,
    /// Seed of the hold-out choice.
    pub seed: u64,
}

/// Per-task counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSummary {
    /// Task index in the suite.
    pub task_index: usize,
    /// Task name.
    pub task_name: String,
    /// Instruction.
    pub instruction: String,
    /// Episodes found.
    pub episodes: usize,
    /// Successful episodes.
    pub successes: usize,
    /// Successful episodes used for training.
    pub train_episodes: usize,
    /// Successful episodes held out.
    pub val_episodes: usize,
}

/// Frames of a set of episodes with their targets (CPU tensors).
#[derive(Debug)]
pub struct Split {
    /// Agent-view frames `u8 [N, 3, S, S]`.
    pub agent_view: Tensor,
    /// Wrist frames `u8 [N, 3, S, S]`.
    pub wrist_view: Tensor,
    /// Proprioception `f32 [N, P]`.
    pub proprio: Tensor,
    /// Target tokens `i64 [N, C, D]`.
    pub tokens: Tensor,
    /// Valid chunk slots `f32 [N, C]` (1 inside the episode).
    pub mask: Tensor,
    /// Position of the frame's task in [`DemoDataset::tasks`], `i64 [N]`.
    pub task: Tensor,
}

impl Split {
    /// Frames in the split.
    pub fn len(&self) -> i64 {
        self.task.size()[0]
    }

    /// True when the split has no frames.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows `index` (`i64 [B]`, CPU) of every tensor, moved to `device`:
    /// `(agent, wrist, proprio, tokens, mask, task)`.
    pub fn batch(&self, index: &Tensor, device: Device) -> [Tensor; 6] {
        [
            &self.agent_view,
            &self.wrist_view,
            &self.proprio,
            &self.tokens,
            &self.mask,
            &self.task,
        ]
        .map(|t| t.index_select(0, index).to_device(device))
    }
}

/// An in-memory demonstration set.
#[derive(Debug)]
pub struct DemoDataset {
    /// Folder it was read from.
    pub dir: PathBuf,
    /// Tasks in index order.
    pub tasks: Vec<TaskSummary>,
    /// Training frames.
    pub train: Split,
    /// Held-out frames (`None` when nothing was held out).
    pub val: Option<Split>,
    /// Mean of the training proprioception, per value.
    pub proprio_mean: Vec<f32>,
    /// Standard deviation of the training proprioception, per value.
    pub proprio_std: Vec<f32>,
}

/// Every `*.demo` file under `dir`, sorted.
pub fn episode_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = std::fs::read_dir(&folder).map_err(|source| Error::Io {
            path: folder.clone(),
            source,
        })?;
        for entry in entries {
            let path = entry
                .map_err(|source| Error::Io {
                    path: folder.clone(),
                    source,
                })?
                .path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == EXTENSION) {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Reads every episode under `dir` (checked, in parallel).
pub fn read_all(dir: &Path) -> Result<Vec<Episode>> {
    read_each(dir, Ok)
}

/// Reads every episode under `dir` (checked, in parallel) and shrinks its
/// frames to `image_size` as soon as its file is read, so that a folder's
/// full-size frames never sit in memory together (1330 demonstrations of
/// 128×128 frames decode to 18 GB; at 64×64 they are 4.6 GB).
pub fn read_all_resized(dir: &Path, image_size: i64) -> Result<Vec<Episode>> {
    read_each(dir, |mut episode| {
        episode.agent_view = resized(&episode.agent_view, image_size)?;
        episode.wrist_view = resized(&episode.wrist_view, image_size)?;
        Ok(episode)
    })
}

/// Every episode under `dir`, read in parallel and passed through `then`.
fn read_each(dir: &Path, then: impl Fn(Episode) -> Result<Episode> + Sync) -> Result<Vec<Episode>> {
    let files = episode_files(dir)?;
    if files.is_empty() {
        return Err(Error::EmptyDataset {
            dir: dir.to_path_buf(),
        });
    }
    files
        .par_iter()
        .map(|path| then(read_episode(path)?))
        .collect()
}

/// `images` as `u8 [N, 3, size, size]`: the arithmetic of every training
/// frame, whatever size it was stored at.
fn frames_tensor(images: &[&image::RgbImage], size: i64) -> Result<Tensor> {
    let x = images_to_tensor(images, Device::Cpu)?.to_kind(Kind::Float);
    Ok(resize_images(&x, size)
        .round()
        .clamp(0.0, 255.0)
        .to_kind(Kind::Uint8))
}

/// `images` at `size`×`size`, by the same arithmetic as the training tensors
/// (so resizing here first changes no value the model sees).
fn resized(images: &[image::RgbImage], size: i64) -> Result<Vec<image::RgbImage>> {
    if images
        .iter()
        .all(|i| i.dimensions() == (size as u32, size as u32))
    {
        return Ok(images.to_vec());
    }
    let refs: Vec<&image::RgbImage> = images.iter().collect();
    let small = frames_tensor(&refs, size)?
        .permute([0, 2, 3, 1])
        .contiguous();
    let bytes = Vec::<u8>::try_from(small.view([-1]))
        .map_err(|e| Error::mismatch("resized frames", "u8 tensor", e.to_string()))?;
    let frame = (size * size * 3) as usize;
    Ok(bytes
        .chunks_exact(frame)
        .map(|b| {
            image::RgbImage::from_raw(size as u32, size as u32, b.to_vec())
                .expect("chunk holds one frame")
        })
        .collect())
}

/// Frames `0..steps` of an episode, resized, with chunk targets.
fn episode_tensors(episode: &Episode, options: &DatasetOptions) -> Result<[Tensor; 5]> {
    let steps = episode.steps() as i64;
    let frames = |images: &[image::RgbImage]| -> Result<Tensor> {
        let refs: Vec<&image::RgbImage> = images[..steps as usize].iter().collect();
        frames_tensor(&refs, options.image_size)
    };
    let (c, d) = (options.chunk_len, options.action_dim as i64);
    let mut perturbed = vec![false; steps as usize];
    for &s in &episode.meta.perturbed_steps {
        if let Some(flag) = perturbed.get_mut(s) {
            *flag = true;
        }
    }
    let mut tokens = Vec::with_capacity((steps * c * d) as usize);
    let mut mask = Vec::with_capacity((steps * c) as usize);
    for t in 0..steps {
        // Slot k is the expert's plan only while no burst was executed in
        // steps t..t+k: its later labels react to a push obs t cannot foresee.
        let mut planned = true;
        for k in 0..c {
            if k > 0 && t + k < steps && perturbed[(t + k - 1) as usize] {
                planned = false;
            }
            let step = (t + k).min(steps - 1) as usize;
            let action =
                &episode.labels[step * episode.action_dim..(step + 1) * episode.action_dim];
            tokens.extend(options.binning.encode_all(action));
            mask.push(if t + k < steps && planned {
                1.0f32
            } else {
                0.0
            });
        }
    }
    let p = episode.proprio_dim as i64;
    Ok([
        frames(&episode.agent_view)?,
        frames(&episode.wrist_view)?,
        Tensor::from_slice(&episode.proprio[..(steps * p) as usize]).view([steps, p]),
        Tensor::from_slice(&tokens).view([steps, c, d]),
        Tensor::from_slice(&mask).view([steps, c]),
    ])
}

fn build_split(episodes: &[(&Episode, i64)], options: &DatasetOptions) -> Result<Split> {
    // The frames, by far the largest part, are copied episode by episode into
    // tensors allocated once, so that a split's frames exist twice at most
    // (decoded episodes + split), not three times (+ per-episode tensors
    // kept for a final concatenation).
    let rows: i64 = episodes.iter().map(|(e, _)| e.steps() as i64).sum();
    let side = options.image_size;
    let frames = || Tensor::zeros([rows, 3, side, side], (Kind::Uint8, Device::Cpu));
    let (agent_view, wrist_view) = (frames(), frames());
    let mut small: [Vec<Tensor>; 3] = Default::default();
    let mut offset = 0;
    for (episode, _) in episodes {
        let [agent, wrist, proprio, tokens, mask] = episode_tensors(episode, options)?;
        let steps = agent.size()[0];
        agent_view.narrow(0, offset, steps).copy_(&agent);
        wrist_view.narrow(0, offset, steps).copy_(&wrist);
        offset += steps;
        for (list, tensor) in small.iter_mut().zip([proprio, tokens, mask]) {
            list.push(tensor);
        }
    }
    let cat = |i: usize| Tensor::cat(&small[i], 0);
    let task: Vec<i64> = episodes
        .iter()
        .flat_map(|(e, t)| std::iter::repeat_n(*t, e.steps()))
        .collect();
    Ok(Split {
        agent_view,
        wrist_view,
        proprio: cat(0),
        tokens: cat(1),
        mask: cat(2),
        task: Tensor::from_slice(&task),
    })
}

impl DemoDataset {
    /// Loads and checks `dir`.
    pub fn load(dir: &Path, options: &DatasetOptions) -> Result<Self> {
        let _span = tracing::info_span!("load_demos", dir = %dir.display()).entered();
        let episodes = read_all_resized(dir, options.image_size)?;
        let manifest = Manifest::read_if_present(&dir.join(MANIFEST_FILE))?;
        Self::from_episodes(dir, &episodes, manifest.as_ref(), options)
    }

    /// Builds the dataset from episodes already in memory.
    pub fn from_episodes(
        dir: &Path,
        episodes: &[Episode],
        manifest: Option<&Manifest>,
        options: &DatasetOptions,
    ) -> Result<Self> {
        if episodes.is_empty() {
            return Err(Error::EmptyDataset {
                dir: dir.to_path_buf(),
            });
        }
        for e in episodes {
            if e.action_dim != options.action_dim || e.proprio_dim != options.proprio_dim {
                return Err(Error::mismatch(
                    format!(
                        "episode of task {} state {} in {}",
                        e.meta.task_index,
                        e.meta.state_index,
                        dir.display()
                    ),
                    format!(
                        "action_dim {} and proprio_dim {} (the model's)",
                        options.action_dim, options.proprio_dim
                    ),
                    format!(
                        "action_dim {} and proprio_dim {}",
                        e.action_dim, e.proprio_dim
                    ),
                ));
            }
        }
        let mut tasks: Vec<TaskSummary> = Vec::new();
        let mut note = |index: usize, name: &str, instruction: &str| -> Result<()> {
            match tasks.iter().find(|t| t.task_index == index) {
                Some(t) if t.instruction != instruction => Err(Error::mismatch(
                    format!("instruction of task {index} in {}", dir.display()),
                    format!("`{}` everywhere", t.instruction),
                    format!("`{instruction}`"),
                )),
                Some(_) => Ok(()),
                None => {
                    tasks.push(TaskSummary {
                        task_index: index,
                        task_name: name.to_string(),
                        instruction: instruction.to_string(),
                        episodes: 0,
                        successes: 0,
                        train_episodes: 0,
                        val_episodes: 0,
                    });
                    Ok(())
                }
            }
        };
        for t in manifest.map(|m| m.tasks.as_slice()).unwrap_or_default() {
            note(t.task_index, &t.task_name, &t.instruction)?;
        }
        for e in episodes {
            note(e.meta.task_index, &e.meta.task_name, &e.meta.instruction)?;
        }
        tasks.sort_by_key(|t| t.task_index);

        let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
        let (mut train, mut val) = (Vec::new(), Vec::new());
        for (position, task) in tasks.iter_mut().enumerate() {
            let mine: Vec<&Episode> = episodes
                .iter()
                .filter(|e| e.meta.task_index == task.task_index)
                .collect();
            let mut wins: Vec<&Episode> = mine
                .iter()
                .copied()
                .filter(|e| e.meta.success && e.steps() > 0)
                .collect();
            task.episodes = mine.len();
            task.successes = wins.len();
            if wins.is_empty() {
                return Err(Error::NoSuccessfulDemo {
                    dir: dir.to_path_buf(),
                    task_index: task.task_index,
                    instruction: task.instruction.clone(),
                    episodes: mine.len(),
                });
            }
            wins.shuffle(&mut rng);
            let held = if options.val_fraction > 0.0 && wins.len() >= 2 {
                ((wins.len() as f64 * options.val_fraction).round() as usize)
                    .clamp(1, wins.len() - 1)
            } else {
                0
            };
            task.val_episodes = held;
            task.train_episodes = wins.len() - held;
            val.extend(wins[..held].iter().map(|e| (*e, position as i64)));
            train.extend(wins[held..].iter().map(|e| (*e, position as i64)));
        }
        let train = build_split(&train, options)?;
        let val = if val.is_empty() {
            None
        } else {
            Some(build_split(&val, options)?)
        };
        let mean = train.proprio.mean_dim(0, false, Kind::Float);
        let std = train.proprio.std_dim(0, false, false);
        Ok(Self {
            dir: dir.to_path_buf(),
            tasks,
            proprio_mean: Vec::try_from(mean).expect("f32 statistics"),
            proprio_std: Vec::try_from(std).expect("f32 statistics"),
            train,
            val,
        })
    }

    /// Instructions in task order (row `i` belongs to `tasks[i]`).
    pub fn instructions(&self) -> Vec<&str> {
        self.tasks.iter().map(|t| t.instruction.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binning::ActionBinning;
    use crate::demos::format::write_episode;
    use crate::synthetic;

    fn options(image_size: i64) -> DatasetOptions {
        DatasetOptions {
            image_size,
            chunk_len: 4,
            action_dim: synthetic::ACTION_DIM,
            proprio_dim: synthetic::PROPRIO_DIM,
            binning: ActionBinning::default(),
            val_fraction: 0.25,
            seed: 3,
        }
    }

    fn same(a: &Tensor, b: &Tensor) -> bool {
        a.size() == b.size() && a.kind() == b.kind() && a.equal(b)
    }

    /// Loading a folder shrinks each episode's frames as it is read; the
    /// tensors are those of resizing the whole episodes in memory.
    #[test]
    fn shrinking_frames_on_read_changes_no_training_value() {
        let dir = tempfile::tempdir().unwrap();
        let episodes = synthetic::episodes(4, 6, 32, 1);
        for (i, e) in episodes.iter().enumerate() {
            write_episode(&dir.path().join(format!("{i:03}.demo")), e).unwrap();
        }
        for size in [16, 12, 32] {
            let loaded = DemoDataset::load(dir.path(), &options(size)).unwrap();
            let read = read_all(dir.path()).unwrap();
            let in_memory =
                DemoDataset::from_episodes(dir.path(), &read, None, &options(size)).unwrap();
            let splits = [(&loaded.train, &in_memory.train)]
                .into_iter()
                .chain(loaded.val.as_ref().zip(in_memory.val.as_ref()));
            for (a, b) in splits {
                assert_eq!(a.agent_view.size()[2], size);
                assert!(same(&a.agent_view, &b.agent_view), "agent view at {size}");
                assert!(same(&a.wrist_view, &b.wrist_view), "wrist view at {size}");
                assert!(same(&a.tokens, &b.tokens) && same(&a.task, &b.task));
            }
        }
    }

    /// A target chunk counts up to the first perturbed step after its
    /// observation; slots past the episode's end never count.
    #[test]
    fn target_slots_stop_at_the_first_perturbed_step() {
        let mut episode = synthetic::episodes(1, 10, 8, 1).remove(0);
        let steps = episode.steps() as i64;
        let unperturbed = episode_tensors(&episode, &options(8)).unwrap()[4].shallow_clone();
        episode.meta.perturbed_steps = vec![3, 4];
        let mask = episode_tensors(&episode, &options(8)).unwrap()[4].shallow_clone();
        let row = |t: i64| Vec::<f32>::try_from(mask.get(t)).unwrap();
        // Chunk length 4: observation t's slot k needs steps t..t+k unperturbed.
        assert_eq!(row(0), [1.0, 1.0, 1.0, 1.0]);
        assert_eq!(row(1), [1.0, 1.0, 1.0, 0.0]);
        assert_eq!(row(2), [1.0, 1.0, 0.0, 0.0]);
        assert_eq!(row(3), [1.0, 0.0, 0.0, 0.0]);
        assert_eq!(row(4), [1.0, 0.0, 0.0, 0.0]);
        assert_eq!(row(5), [1.0, 1.0, 1.0, 1.0]);
        assert_eq!(row(steps - 2), [1.0, 1.0, 0.0, 0.0]);
        let tail = Vec::<f32>::try_from(unperturbed.get(steps - 2)).unwrap();
        assert_eq!(
            tail,
            [1.0, 1.0, 0.0, 0.0],
            "past the end without bursts too"
        );
    }
}
