//! Checkpoints: a folder with `model.safetensors` (every named tensor of the
//! policy, f32) and `config.json` (architecture, tokenizer vocabulary, action
//! binning, and free-form provenance), both written atomically, then
//! `MANIFEST.json` with their sizes and SHA-256 ([`wmrl_report::manifest`]).
//! Loading verifies the manifest first (a folder written before manifests
//! loads without one), so a truncated or altered file is named as such.
//!
//! Loading checks every tensor's name and shape against the architecture built
//! from `config.json` *before* copying any value, so a mismatched checkpoint
//! fails with the tensor and both shapes and leaves the model untouched.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, View};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor, nn};

use crate::config::ModelConfig;
use crate::model::VlaPolicy;
use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

/// Weights file inside a checkpoint folder.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// Config file inside a checkpoint folder.
pub const CONFIG_FILE: &str = "config.json";
/// Value of [`CheckpointConfig::format`].
pub const FORMAT: &str = "wmrl-vla";
/// Current [`CheckpointConfig::version`].
pub const VERSION: u32 = 1;

/// `config.json` of a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointConfig {
    /// Always `"wmrl-vla"`.
    pub format: String,
    /// Format version (1).
    pub version: u32,
    /// Architecture, including the action chunk and its binning.
    pub model: ModelConfig,
    /// Instruction vocabulary.
    pub tokenizer: Tokenizer,
    /// Provenance (training config, data, step, metrics); not read back.
    #[serde(default)]
    pub info: serde_json::Value,
}

/// An owned f32 tensor in safetensors' view (little-endian bytes).
pub struct OwnedView {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// f32 values as little-endian bytes.
    pub data: Vec<u8>,
}

impl OwnedView {
    /// Rows of `width` f32 values: `[values / width, width]`.
    pub fn rows(values: impl Iterator<Item = f32>, width: usize) -> Self {
        let data: Vec<u8> = values.flat_map(f32::to_le_bytes).collect();
        Self {
            shape: vec![data.len() / 4 / width.max(1), width],
            data,
        }
    }
}

impl View for OwnedView {
    fn dtype(&self) -> Dtype {
        Dtype::F32
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// Named tensors of a variable store, sorted by name.
fn named_tensors(vs: &nn::VarStore) -> BTreeMap<String, Tensor> {
    vs.variables().into_iter().collect()
}

/// Serialises every tensor of `policy` to safetensors bytes.
pub fn weights_bytes(policy: &VlaPolicy) -> Result<Vec<u8>> {
    var_store_bytes(policy.var_store())
}

/// Serialises every tensor of a variable store (as f32) to safetensors bytes.
/// Other models (the world model) save their weights with it too.
pub fn var_store_bytes(vs: &nn::VarStore) -> Result<Vec<u8>> {
    let mut views = Vec::new();
    for (name, tensor) in named_tensors(vs) {
        let cpu = tensor
            .detach()
            .to_device(Device::Cpu)
            .to_kind(Kind::Float)
            .contiguous();
        let numel = cpu.numel();
        let mut data = vec![0u8; numel * 4];
        cpu.f_copy_data_u8(&mut data, numel)
            .map_err(Error::torch(format!("reading tensor `{name}`")))?;
        let shape = cpu.size().iter().map(|&d| d as usize).collect();
        views.push((name, OwnedView { shape, data }));
    }
    safetensors::tensor::serialize(views, &None).map_err(|e| Error::BadCheckpoint {
        path: PathBuf::from(WEIGHTS_FILE),
        message: e.to_string(),
    })
}

/// Writes `dir/model.safetensors`, `dir/config.json` and then the manifest
/// of both, each atomically.
pub fn save(policy: &VlaPolicy, dir: &Path, info: serde_json::Value) -> Result<()> {
    let _span = tracing::info_span!("save_checkpoint", dir = %dir.display()).entered();
    wmrl_report::write_atomic(&dir.join(WEIGHTS_FILE), &weights_bytes(policy)?)?;
    let config = CheckpointConfig {
        format: FORMAT.into(),
        version: VERSION,
        model: policy.config().clone(),
        tokenizer: policy.tokenizer().clone(),
        info,
    };
    wmrl_report::write_json_atomic(&dir.join(CONFIG_FILE), &config)?;
    wmrl_report::manifest::write(dir, &[WEIGHTS_FILE, CONFIG_FILE])?;
    Ok(())
}

/// Reads and checks `dir/config.json`.
pub fn read_config(dir: &Path) -> Result<CheckpointConfig> {
    let path = dir.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    let config: CheckpointConfig = serde_json::from_str(&text).map_err(|source| Error::Json {
        path: path.clone(),
        source,
    })?;
    if config.format != FORMAT || config.version != VERSION {
        return Err(Error::BadCheckpoint {
            path,
            message: format!(
                "format `{}` version {} is not a {FORMAT} checkpoint of version {VERSION}",
                config.format, config.version
            ),
        });
    }
    config.model.validate()?;
    Ok(config)
}

/// Builds the policy described by `dir/config.json` on `device` and loads its weights.
pub fn load(dir: &Path, device: Device) -> Result<VlaPolicy> {
    let _span = tracing::info_span!("load_checkpoint", dir = %dir.display()).entered();
    wmrl_report::manifest::verify_if_present(dir).map_err(wmrl_report::Error::from)?;
    let config = read_config(dir)?;
    let mut policy = VlaPolicy::new(config.model, config.tokenizer, device)?;
    load_weights(&mut policy, &dir.join(WEIGHTS_FILE))?;
    Ok(policy)
}

/// Copies the tensors of a safetensors file into `policy`, after checking that
/// names, shapes and dtypes match exactly.
pub fn load_weights(policy: &mut VlaPolicy, path: &Path) -> Result<()> {
    load_var_store(policy.var_store_mut(), path)
}

/// Copies the tensors of a safetensors file into a variable store, after
/// checking that names, shapes and dtypes match exactly (nothing is copied
/// when any tensor is missing, extra or of another shape).
pub fn load_var_store(vs: &mut nn::VarStore, path: &Path) -> Result<()> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| Error::BadCheckpoint {
        path: path.to_path_buf(),
        message: format!("not a safetensors file: {e:?}"),
    })?;
    let model = named_tensors(vs);
    for (name, tensor) in &model {
        let expected = tensor.size();
        let view = file.tensor(name).map_err(|_| Error::MissingTensor {
            path: path.to_path_buf(),
            name: name.clone(),
            expected: expected.clone(),
        })?;
        let found: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
        if found != expected {
            return Err(Error::ShapeMismatch {
                path: path.to_path_buf(),
                name: name.clone(),
                expected,
                found,
            });
        }
        if view.dtype() != Dtype::F32 {
            return Err(Error::BadCheckpoint {
                path: path.to_path_buf(),
                message: format!("tensor `{name}` has dtype {:?}, expected F32", view.dtype()),
            });
        }
    }
    let mut extra: Vec<_> = file
        .names()
        .into_iter()
        .filter(|n| !model.contains_key(*n))
        .collect();
    extra.sort();
    if let Some(name) = extra.first() {
        let found = file
            .tensor(name)
            .map(|v| v.shape().iter().map(|&d| d as i64).collect())
            .unwrap_or_default();
        return Err(Error::UnexpectedTensor {
            path: path.to_path_buf(),
            name: name.to_string(),
            found,
        });
    }
    tch::no_grad(|| -> Result<()> {
        for (name, mut tensor) in model {
            let view = file.tensor(&name).expect("checked above");
            let source = Tensor::f_from_data_size(view.data(), &tensor.size(), Kind::Float)
                .map_err(Error::torch(format!("decoding tensor `{name}`")))?;
            tensor
                .f_copy_(&source)
                .map_err(Error::torch(format!("copying tensor `{name}`")))?;
        }
        Ok(())
    })
}
