//! TensorBoard event files, so `tensorboard --logdir runs/` shows a run's
//! metrics live: scalars only, written with the format's few lines instead
//! of a dependency.
//!
//! A file is a sequence of TFRecords (`u64` length, masked CRC-32C of the
//! length, the bytes, masked CRC-32C of the bytes), each an `Event`
//! protobuf: the first carries `file_version = "brain.Event:2"`, the others
//! a `Summary` of `simple_value`s at one step. [`EventWriter::scalars`]
//! writes one event per call; [`read_scalars`] reads a file back, checking
//! every checksum (the tests use it, and so can a user without TensorBoard).
//!
//! A resumed run opens a new file beside the old ones; TensorBoard reads
//! them all, so the steps a killed run had written past its checkpoint show
//! twice (the re-run's values follow the first ones).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{Error, Result};

/// Appends scalar events to one `events.out.tfevents.*` file.
#[derive(Debug)]
pub struct EventWriter {
    path: PathBuf,
    file: File,
}

impl EventWriter {
    /// Creates a new event file in `dir` (made if needed), named as
    /// TensorBoard expects (`events.out.tfevents.<seconds>.<host>.<pid>`),
    /// and writes its version record.
    pub fn create(dir: &Path) -> Result<Self> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let seconds = wall_time() as u64;
        let host = std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|h| h.trim().replace(['/', ' '], "_"))
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        // A run resumed in the same second by the same process (or a reused
        // pid) gets a numbered sibling: TensorBoard reads every file.
        let stem = format!(
            "events.out.tfevents.{seconds}.{host}.{}",
            std::process::id()
        );
        let mut k = 0u32;
        let (path, file) = loop {
            let name = if k == 0 {
                stem.clone()
            } else {
                format!("{stem}.{k}")
            };
            let path = dir.join(name);
            match OpenOptions::new().create_new(true).append(true).open(&path) {
                Ok(file) => break (path, file),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && k < 1000 => k += 1,
                Err(e) => return Err(io(&path)(e)),
            }
        };
        let mut writer = Self { path, file };
        let mut event = Vec::new();
        put_double(&mut event, 1, wall_time());
        put_bytes(&mut event, 3, b"brain.Event:2");
        writer.record(&event)?;
        Ok(writer)
    }

    /// The file events go to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one event at `step` holding every `(tag, value)` (non-finite
    /// values are left out: TensorBoard cannot draw them), and flushes it.
    pub fn scalars(&mut self, step: i64, values: &[(String, f64)]) -> Result<()> {
        let mut summary = Vec::new();
        for (tag, value) in values.iter().filter(|(_, v)| v.is_finite()) {
            let mut entry = Vec::new();
            put_bytes(&mut entry, 1, tag.as_bytes());
            put_key(&mut entry, 2, 5);
            entry.extend_from_slice(&(*value as f32).to_le_bytes());
            put_bytes(&mut summary, 1, &entry);
        }
        let mut event = Vec::new();
        put_double(&mut event, 1, wall_time());
        put_key(&mut event, 2, 0);
        put_varint(&mut event, step as u64);
        put_bytes(&mut event, 5, &summary);
        self.record(&event)
    }

    fn record(&mut self, data: &[u8]) -> Result<()> {
        let len = (data.len() as u64).to_le_bytes();
        let mut record = Vec::with_capacity(data.len() + 16);
        record.extend_from_slice(&len);
        record.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
        record.extend_from_slice(data);
        record.extend_from_slice(&masked_crc32c(data).to_le_bytes());
        self.file
            .write_all(&record)
            .and_then(|()| self.file.flush())
            .map_err(|source| Error::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// The numeric leaves of a JSON value as TensorBoard tags: object keys
/// joined with `/`, array elements by index, booleans as 0 or 1; strings
/// and nulls are left out.
pub fn scalar_leaves(value: &serde_json::Value) -> Vec<(String, f64)> {
    fn walk(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, f64)>) {
        let join = |key: &str| {
            if prefix.is_empty() {
                key.to_string()
            } else {
                format!("{prefix}/{key}")
            }
        };
        match value {
            serde_json::Value::Number(n) => out.extend(n.as_f64().map(|v| (prefix.into(), v))),
            serde_json::Value::Bool(b) => out.push((prefix.into(), f64::from(u8::from(*b)))),
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    walk(&join(k), v, out);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(&join(&i.to_string()), v, out);
                }
            }
            serde_json::Value::String(_) | serde_json::Value::Null => {}
        }
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out
}

/// One scalar event read back: its step and `(tag, value)`s.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalarEvent {
    /// The event's step.
    pub step: i64,
    /// Tags and values, in file order.
    pub values: Vec<(String, f32)>,
}

/// Reads the scalar events of an event file, checking the format version
/// and every record's checksums. A truncated last record (a writer killed
/// mid-write) ends the read; any other damage is an error naming the file.
pub fn read_scalars(path: &Path) -> Result<Vec<ScalarEvent>> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.into(),
        source,
    })?;
    let bad = |message: String| Error::EventFile {
        path: path.into(),
        message,
    };
    let mut events = Vec::new();
    let mut at = 0;
    let mut version = false;
    while at + 12 <= bytes.len() {
        let len_bytes = &bytes[at..at + 8];
        let len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes")) as usize;
        let crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
        if crc != masked_crc32c(len_bytes) {
            return Err(bad(format!("length checksum mismatch at byte {at}")));
        }
        let Some(end) = (at + 12).checked_add(len).filter(|e| e + 4 <= bytes.len()) else {
            break;
        };
        let data = &bytes[at + 12..end];
        let crc = u32::from_le_bytes(bytes[end..end + 4].try_into().expect("4 bytes"));
        if crc != masked_crc32c(data) {
            return Err(bad(format!("record checksum mismatch at byte {at}")));
        }
        let event = parse_event(data).ok_or_else(|| bad(format!("bad Event at byte {at}")))?;
        match event {
            Parsed::Version(v) if v == "brain.Event:2" => version = true,
            Parsed::Version(v) => return Err(bad(format!("unknown file version {v:?}"))),
            Parsed::Scalars(e) if version => events.push(e),
            Parsed::Scalars(_) => return Err(bad("scalars before the version record".into())),
        }
        at = end + 4;
    }
    Ok(events)
}

enum Parsed {
    Version(String),
    Scalars(ScalarEvent),
}

/// Decodes the fields of an Event this module writes.
fn parse_event(data: &[u8]) -> Option<Parsed> {
    let mut step = 0;
    let mut values = Vec::new();
    let mut version = None;
    for (field, value) in fields(data)? {
        match (field, value) {
            (2, Field::Varint(v)) => step = v as i64,
            (3, Field::Bytes(b)) => version = Some(String::from_utf8(b.to_vec()).ok()?),
            (5, Field::Bytes(summary)) => {
                for (f, entry) in fields(summary)? {
                    let (1, Field::Bytes(entry)) = (f, entry) else {
                        continue;
                    };
                    let (mut tag, mut value) = (None, None);
                    for (f, v) in fields(entry)? {
                        match (f, v) {
                            (1, Field::Bytes(t)) => tag = Some(String::from_utf8(t.to_vec()).ok()?),
                            (2, Field::Fixed32(x)) => value = Some(f32::from_le_bytes(x)),
                            _ => {}
                        }
                    }
                    values.push((tag?, value?));
                }
            }
            _ => {}
        }
    }
    Some(match version {
        Some(v) => Parsed::Version(v),
        None => Parsed::Scalars(ScalarEvent { step, values }),
    })
}

enum Field<'a> {
    Varint(u64),
    Fixed64,
    Fixed32([u8; 4]),
    Bytes(&'a [u8]),
}

/// The (field number, value) pairs of a protobuf message.
fn fields(mut data: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let key = varint(&mut data)?;
        let field = match key & 7 {
            0 => Field::Varint(varint(&mut data)?),
            1 => {
                data = data.get(8..)?;
                Field::Fixed64
            }
            2 => {
                let len = usize::try_from(varint(&mut data)?).ok()?;
                let bytes = data.get(..len)?;
                data = &data[len..];
                Field::Bytes(bytes)
            }
            5 => {
                let bytes: [u8; 4] = data.get(..4)?.try_into().ok()?;
                data = &data[4..];
                Field::Fixed32(bytes)
            }
            _ => return None,
        };
        out.push((key >> 3, field));
    }
    Some(out)
}

fn varint(data: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = data.split_first()?;
        *data = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, field: u64, wire: u64) {
    put_varint(out, (field << 3) | wire);
}

fn put_double(out: &mut Vec<u8>, field: u64, v: f64) {
    put_key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_key(out, field, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn wall_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// CRC-32C (Castagnoli), as TFRecord uses it.
fn crc32c(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut crc = i as u32;
            let mut k = 0;
            while k < 8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0x82f6_3b78
                } else {
                    crc >> 1
                };
                k += 1;
            }
            table[i] = crc;
            i += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &b in data {
        crc = TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// TFRecord's masked CRC: rotated right by 15 bits, plus a constant.
fn masked_crc32c(data: &[u8]) -> u32 {
    let crc = crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn scalars_read_back_with_their_steps_and_tags() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = EventWriter::create(dir.path()).unwrap();
        let row = serde_json::json!({
            "iteration": 3, "mode": "wmrl", "eval": null,
            "learner": {"entropy": 1.5, "clip_fraction": 0.25},
            "per_task": [0.5, 0.75], "calibrator_identity": true,
        });
        let leaves = scalar_leaves(&row);
        assert_eq!(
            leaves,
            vec![
                ("calibrator_identity".to_string(), 1.0),
                ("iteration".into(), 3.0),
                ("learner/clip_fraction".into(), 0.25),
                ("learner/entropy".into(), 1.5),
                ("per_task/0".into(), 0.5),
                ("per_task/1".into(), 0.75),
            ]
        );
        writer.scalars(3, &leaves).unwrap();
        writer
            .scalars(4, &[("loss".into(), 0.125), ("nan".into(), f64::NAN)])
            .unwrap();
        let events = read_scalars(writer.path()).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].step, 3);
        assert_eq!(events[0].values.len(), 6);
        assert!(events[0].values.contains(&("learner/entropy".into(), 1.5)));
        assert_eq!(
            events[1],
            ScalarEvent {
                step: 4,
                values: vec![("loss".into(), 0.125)]
            }
        );
        let name = writer.path().file_name().unwrap().to_string_lossy();
        assert!(name.starts_with("events.out.tfevents."), "{name}");
    }

    #[test]
    fn damage_is_named_and_a_torn_last_record_ends_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = EventWriter::create(dir.path()).unwrap();
        writer.scalars(1, &[("a".into(), 1.0)]).unwrap();
        writer.scalars(2, &[("a".into(), 2.0)]).unwrap();
        let path = writer.path().to_path_buf();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert_eq!(read_scalars(&path).unwrap().len(), 1, "torn record dropped");
        let mut flipped = bytes.clone();
        let last = flipped.len() - 6;
        flipped[last] ^= 0xff;
        std::fs::write(&path, &flipped).unwrap();
        let err = read_scalars(&path).unwrap_err().to_string();
        assert!(
            err.contains("checksum") && err.contains("tfevents"),
            "{err}"
        );
    }

    #[test]
    fn a_second_writer_in_the_same_folder_gets_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = EventWriter::create(dir.path()).unwrap();
        let b = EventWriter::create(dir.path()).unwrap();
        assert_ne!(a.path(), b.path());
    }
}
