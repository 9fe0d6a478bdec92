//! Word-level instruction tokenizer with a vocabulary built from the training
//! instructions and saved in the checkpoint.
//!
//! Normalisation: lower-case, split on anything that is not a letter or a digit
//! ("put the mug on the left plate." → `put the mug on the left plate`). Id 0 is
//! padding, id 1 stands for words not in the vocabulary; the other words follow
//! in sorted order, so the same instructions always give the same vocabulary.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Padding token id.
pub const PAD: i64 = 0;
/// Unknown-word token id.
pub const UNK: i64 = 1;
const SPECIALS: [&str; 2] = ["<pad>", "<unk>"];

/// A fixed vocabulary of words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tokenizer {
    /// Every token, indexed by id (`<pad>`, `<unk>`, then words in sorted order).
    pub vocabulary: Vec<String>,
}

/// An encoded instruction: ids padded to a fixed length, and how many are real.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// Token ids, `PAD` after `len`.
    pub ids: Vec<i64>,
    /// Real tokens (at least 1: an empty instruction encodes as one `UNK`).
    pub len: usize,
    /// Words that were not in the vocabulary.
    pub unknown: Vec<String>,
    /// Whether words were dropped to fit the length.
    pub truncated: bool,
}

/// Lower-cased words of a text.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

impl Tokenizer {
    /// Builds the vocabulary of a set of instructions.
    pub fn from_instructions<'a>(instructions: impl IntoIterator<Item = &'a str>) -> Self {
        let set: BTreeSet<String> = instructions.into_iter().flat_map(words).collect();
        let vocabulary = SPECIALS.iter().map(|s| s.to_string()).chain(set).collect();
        Self { vocabulary }
    }

    /// Vocabulary size including the special tokens.
    pub fn len(&self) -> usize {
        self.vocabulary.len()
    }

    /// True only for a vocabulary without even the special tokens.
    pub fn is_empty(&self) -> bool {
        self.vocabulary.is_empty()
    }

    fn id(&self, word: &str) -> Option<i64> {
        // The words after the specials are sorted, so binary search finds them.
        let words = &self.vocabulary[SPECIALS.len().min(self.vocabulary.len())..];
        words
            .binary_search_by(|w| w.as_str().cmp(word))
            .ok()
            .map(|i| (i + SPECIALS.len()) as i64)
    }

    /// Encodes `text` into exactly `max_len` ids.
    pub fn encode(&self, text: &str, max_len: usize) -> Encoded {
        let mut ids = Vec::with_capacity(max_len);
        let mut unknown = Vec::new();
        let mut truncated = false;
        for word in words(text) {
            if ids.len() == max_len {
                truncated = true;
                break;
            }
            match self.id(&word) {
                Some(id) => ids.push(id),
                None => {
                    ids.push(UNK);
                    unknown.push(word);
                }
            }
        }
        if ids.is_empty() && max_len > 0 {
            ids.push(UNK);
        }
        let len = ids.len();
        ids.resize(max_len, PAD);
        Encoded {
            ids,
            len,
            unknown,
            truncated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_sorted_vocabulary_and_encodes() {
        let tok = Tokenizer::from_instructions(["Put the mug on the plate.", "open the drawer"]);
        assert_eq!(tok.vocabulary[..2], ["<pad>", "<unk>"]);
        assert_eq!(
            tok.vocabulary[2..],
            ["drawer", "mug", "on", "open", "plate", "put", "the"]
        );
        let e = tok.encode("put the BANANA on the plate", 8);
        assert_eq!(e.len, 6);
        assert_eq!(e.ids, vec![7, 8, UNK, 4, 8, 6, PAD, PAD]);
        assert_eq!(e.unknown, vec!["banana"]);
        assert!(!e.truncated);
        let e = tok.encode("put the mug on the plate", 3);
        assert!(e.truncated);
        assert_eq!(e.ids.len(), 3);
        assert_eq!(tok.encode("", 4).ids, vec![UNK, PAD, PAD, PAD]);
    }
}
