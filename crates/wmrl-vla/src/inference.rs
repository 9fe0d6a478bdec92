//! Batched inference from plain inputs (RGB images, proprioception, instruction
//! text) to action chunks, without gradients.

use image::RgbImage;
use tch::{Device, Kind, Tensor};

use crate::distribution::{ActionDistribution, Decoding};
use crate::model::VlaPolicy;
use crate::{Error, Result};

/// One environment's observation and instruction.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInput<'a> {
    /// Third-person camera image (any size; resized to the model's).
    pub agent_view: &'a RgbImage,
    /// Wrist camera image (same size as `agent_view`).
    pub wrist_view: &'a RgbImage,
    /// Proprioception (`proprio_dim` values, raw: the model normalises them).
    pub proprio: &'a [f32],
    /// Language instruction.
    pub instruction: &'a str,
}

/// A decoded action chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionChunk {
    /// Tokens, row-major `[chunk_len, action_dim]`.
    pub tokens: Vec<i64>,
    /// Continuous actions (bin centres), row-major `[chunk_len, action_dim]`.
    pub actions: Vec<f32>,
    /// Control steps in the chunk.
    pub chunk_len: usize,
    /// Values per action.
    pub action_dim: usize,
    /// `log π(tokens | observation)` under the distribution the tokens were
    /// drawn from (softmax(logits / T) when sampled at T, else T = 1): the
    /// sum of `token_log_probs`.
    pub log_prob: f32,
    /// Each token's log-probability, row-major `[chunk_len, action_dim]`
    /// (empty when not recorded: then only `log_prob` is known).
    pub token_log_probs: Vec<f32>,
    /// Actions of the chunk that were executed (or imagined) before the
    /// policy re-planned or the episode ended: `chunk_len` unless the
    /// executor re-plans every k steps or the episode stopped mid-chunk.
    /// The learner's loss covers these actions' tokens only.
    pub executed: usize,
}

impl ActionChunk {
    /// The log-probability of the executed actions' tokens (the first
    /// `executed × action_dim`); `log_prob` when every action was executed
    /// or per-token values were not recorded.
    pub fn executed_log_prob(&self) -> f32 {
        let n = self.executed.min(self.chunk_len) * self.action_dim;
        if self.executed >= self.chunk_len || self.token_log_probs.len() < n {
            self.log_prob
        } else {
            self.token_log_probs[..n].iter().sum()
        }
    }

    /// The action of control step `step` of the chunk.
    pub fn action(&self, step: usize) -> &[f32] {
        &self.actions[step * self.action_dim..(step + 1) * self.action_dim]
    }

    /// The actions in order.
    pub fn steps(&self) -> impl Iterator<Item = &[f32]> {
        self.actions.chunks(self.action_dim)
    }
}

/// Stacks RGB images of equal size into a `u8` tensor `[B, 3, H, W]` on `device`.
pub fn images_to_tensor(images: &[&RgbImage], device: Device) -> Result<Tensor> {
    let Some(first) = images.first() else {
        return Ok(Tensor::zeros([0, 3, 1, 1], (Kind::Uint8, device)));
    };
    let (w, h) = first.dimensions();
    let mut bytes = Vec::with_capacity(images.len() * (w * h * 3) as usize);
    for (i, image) in images.iter().enumerate() {
        if image.dimensions() != (w, h) {
            return Err(Error::mismatch(
                format!("image {i} size"),
                format!("{w}×{h}"),
                format!("{:?}", image.dimensions()),
            ));
        }
        bytes.extend_from_slice(image.as_raw());
    }
    let hwc = Tensor::from_slice(&bytes).view([images.len() as i64, h as i64, w as i64, 3]);
    Ok(hwc.permute([0, 3, 1, 2]).contiguous().to_device(device))
}

impl VlaPolicy {
    /// Tensors of a batch of inputs: agent view, wrist view (u8 `[B, 3, H, W]`),
    /// proprioception (f32 `[B, P]`) and token ids (`[B, L]`).
    pub fn input_tensors(
        &self,
        inputs: &[PolicyInput<'_>],
    ) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
        let dim = self.config().proprio_dim as usize;
        let mut proprio = Vec::with_capacity(inputs.len() * dim);
        for (i, input) in inputs.iter().enumerate() {
            if input.proprio.len() != dim {
                return Err(Error::mismatch(
                    format!("input {i} proprioception length"),
                    dim,
                    input.proprio.len(),
                ));
            }
            proprio.extend_from_slice(input.proprio);
        }
        let device = self.device();
        let agent = images_to_tensor(
            &inputs.iter().map(|i| i.agent_view).collect::<Vec<_>>(),
            device,
        )?;
        let wrist = images_to_tensor(
            &inputs.iter().map(|i| i.wrist_view).collect::<Vec<_>>(),
            device,
        )?;
        let proprio = Tensor::from_slice(&proprio)
            .view([inputs.len() as i64, dim as i64])
            .to_device(device);
        let ids = self.tokenize(&inputs.iter().map(|i| i.instruction).collect::<Vec<_>>());
        Ok((agent, wrist, proprio, ids))
    }

    /// Decodes one action chunk per input, in one batched forward pass.
    pub fn predict(
        &self,
        inputs: &[PolicyInput<'_>],
        decoding: Decoding,
    ) -> Result<Vec<ActionChunk>> {
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let (agent, wrist, proprio, ids) = self.input_tensors(inputs)?;
        let _guard = tch::no_grad_guard();
        let logits = self.logits(&agent, &wrist, &proprio, &ids);
        let tokens = ActionDistribution::decode(&logits, decoding);
        let log_probs =
            ActionDistribution::for_decoding(&logits, decoding).token_log_probs(&tokens);
        Ok(self.chunks_from_tokens(&tokens, &log_probs))
    }

    /// Samples one chunk per input at `temperature`, drawing every token's
    /// uniform from that input's own RNG (`rngs[i]`), so an episode's samples
    /// are reproducible from its seed whatever the batch holds.
    pub fn sample_seeded<R: rand::Rng>(
        &self,
        inputs: &[PolicyInput<'_>],
        temperature: f64,
        rngs: &mut [R],
    ) -> Result<Vec<ActionChunk>> {
        if inputs.len() != rngs.len() {
            return Err(Error::mismatch(
                "random generators for seeded sampling",
                inputs.len(),
                rngs.len(),
            ));
        }
        if inputs.is_empty() {
            return Ok(Vec::new());
        }
        let (agent, wrist, proprio, ids) = self.input_tensors(inputs)?;
        let _guard = tch::no_grad_guard();
        let logits = self.logits(&agent, &wrist, &proprio, &ids);
        let per = self.config().tokens_per_chunk() as usize;
        let uniforms: Vec<f32> = rngs
            .iter_mut()
            .flat_map(|rng| (0..per).map(|_| rng.random::<f32>()).collect::<Vec<_>>())
            .collect();
        let action = &self.config().action;
        let uniforms = Tensor::from_slice(&uniforms)
            .view([inputs.len() as i64, action.chunk_len, action.action_dim])
            .to_device(self.device());
        let (tokens, log_probs) = ActionDistribution::decode_with_uniforms(
            &logits,
            Decoding::Sample { temperature },
            &uniforms,
        );
        Ok(self.chunks_from_tokens(&tokens, &log_probs))
    }

    /// Turns tokens `[B, C, D]` and their per-token log-probabilities
    /// `[B, C, D]` into chunks (every action counted as executed until an
    /// executor says otherwise).
    pub fn chunks_from_tokens(
        &self,
        tokens: &Tensor,
        token_log_probs: &Tensor,
    ) -> Vec<ActionChunk> {
        let action = &self.config().action;
        let (chunk_len, action_dim) = (action.chunk_len as usize, action.action_dim as usize);
        let per = chunk_len * action_dim;
        let flat: Vec<i64> = Vec::try_from(
            tokens
                .to_device(Device::Cpu)
                .to_kind(Kind::Int64)
                .flatten(0, -1),
        )
        .expect("tokens convert to i64");
        let lps: Vec<f32> = Vec::try_from(
            token_log_probs
                .to_device(Device::Cpu)
                .to_kind(Kind::Float)
                .flatten(0, -1),
        )
        .expect("log-probs convert to f32");
        flat.chunks(per)
            .zip(lps.chunks(per))
            .map(|(tokens, token_log_probs)| ActionChunk {
                tokens: tokens.to_vec(),
                actions: action.binning.decode_all(tokens),
                chunk_len,
                action_dim,
                log_prob: token_log_probs.iter().sum(),
                token_log_probs: token_log_probs.to_vec(),
                executed: chunk_len,
            })
            .collect()
    }
}
