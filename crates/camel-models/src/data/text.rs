//! Character-level text: a [`CharTokenizer`] (one token per distinct character) and
//! [`TextData`], a corpus split 90 % / 10 % into training and validation tokens from which
//! [`TextData::batch`] draws random windows, as nanoGPT's `shakespeare_char` does.

use super::{DataError, MISSING_HINT};
use camel_nn::{Device, Generator, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Errors of encoding and decoding with a [`CharTokenizer`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenizerError {
    /// A character of the text is not in the vocabulary.
    #[error(
        "encode: character {ch:?} (U+{:04X}) at position {position} is not in the vocabulary of \
         {vocab_size} characters",
        *.ch as u32
    )]
    UnknownChar {
        /// The character.
        ch: char,
        /// Its 0-based position in the text, counted in characters.
        position: usize,
        /// Size of the vocabulary.
        vocab_size: usize,
    },
    /// A token id is outside `0..vocab_size`.
    #[error("decode: token {id} at position {position} is outside 0..{vocab_size}")]
    UnknownId {
        /// The id.
        id: i64,
        /// Its 0-based position in the sequence.
        position: usize,
        /// Size of the vocabulary.
        vocab_size: usize,
    },
    /// The vocabulary is empty, or not sorted and free of duplicates.
    #[error("tokenizer vocabulary: {0}")]
    BadVocab(String),
}

/// A character tokenizer: the vocabulary is the sorted list of the distinct characters of a
/// text, and a character's token is its index in that list.
#[derive(Clone, Debug, PartialEq)]
pub struct CharTokenizer {
    chars: Vec<char>,
    index: HashMap<char, i64>,
}

impl CharTokenizer {
    /// The vocabulary of `text`: its distinct characters, sorted. An empty text is an error.
    pub fn from_text(text: &str) -> Result<CharTokenizer, TokenizerError> {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        CharTokenizer::from_vocab(chars)
    }

    /// A tokenizer over `chars`, which must be non-empty, sorted and without duplicates.
    pub fn from_vocab(chars: Vec<char>) -> Result<CharTokenizer, TokenizerError> {
        if chars.is_empty() {
            return Err(TokenizerError::BadVocab("it is empty".into()));
        }
        if let Some(w) = chars.windows(2).find(|w| w[0] >= w[1]) {
            return Err(TokenizerError::BadVocab(format!(
                "{:?} comes before {:?}; characters must be sorted and distinct",
                w[0], w[1]
            )));
        }
        let index = chars
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as i64))
            .collect();
        Ok(CharTokenizer { chars, index })
    }

    /// Number of tokens.
    pub fn vocab_size(&self) -> usize {
        self.chars.len()
    }

    /// The vocabulary, in token order.
    pub fn vocab(&self) -> &[char] {
        &self.chars
    }

    /// The tokens of `text`; the first character outside the vocabulary is an error naming it
    /// and its position.
    pub fn encode(&self, text: &str) -> Result<Vec<i64>, TokenizerError> {
        text.chars()
            .enumerate()
            .map(|(position, ch)| {
                self.index
                    .get(&ch)
                    .copied()
                    .ok_or(TokenizerError::UnknownChar {
                        ch,
                        position,
                        vocab_size: self.chars.len(),
                    })
            })
            .collect()
    }

    /// The text of `ids`; an id outside the vocabulary is an error naming it and its position.
    pub fn decode(&self, ids: &[i64]) -> Result<String, TokenizerError> {
        ids.iter()
            .enumerate()
            .map(|(position, &id)| {
                usize::try_from(id)
                    .ok()
                    .and_then(|i| self.chars.get(i).copied())
                    .ok_or(TokenizerError::UnknownId {
                        id,
                        position,
                        vocab_size: self.chars.len(),
                    })
            })
            .collect()
    }

    /// The vocabulary as JSON: `{"type": "char", "vocab": "<the characters in order>"}`.
    pub fn to_json(&self) -> String {
        let s: String = self.chars.iter().collect();
        serde_json::json!({"type": "char", "vocab": s}).to_string()
    }

    /// Reads what [`CharTokenizer::to_json`] writes.
    pub fn from_json(text: &str) -> Result<CharTokenizer, TokenizerError> {
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| TokenizerError::BadVocab(format!("not valid JSON: {e}")))?;
        if v["type"] != "char" {
            return Err(TokenizerError::BadVocab(format!(
                "expected \"type\": \"char\", found {}",
                v["type"]
            )));
        }
        let s = v["vocab"]
            .as_str()
            .ok_or_else(|| TokenizerError::BadVocab("no \"vocab\" string".into()))?;
        CharTokenizer::from_vocab(s.chars().collect())
    }

    /// Writes the tokenizer to `path` as JSON.
    pub fn save(&self, path: &Path) -> crate::Result<()> {
        std::fs::write(path, self.to_json() + "\n").map_err(|source| crate::Error::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads a tokenizer that [`CharTokenizer::save`] wrote; errors name the file.
    pub fn load(path: &Path) -> crate::Result<CharTokenizer> {
        let text = std::fs::read_to_string(path).map_err(|source| crate::Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        CharTokenizer::from_json(&text)
            .map_err(|e| crate::Error::Invalid(format!("{}: {e}", path.display())))
    }
}

/// Which part of a [`TextData`] corpus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextSplit {
    /// The first 90 % of the tokens.
    Train,
    /// The last 10 %.
    Val,
}

/// A tokenized corpus split into training (first 90 %) and validation (last 10 %) tokens.
#[derive(Clone, Debug)]
pub struct TextData {
    /// The tokenizer built from the whole text.
    pub tokenizer: CharTokenizer,
    /// Training tokens.
    pub train: Vec<i64>,
    /// Validation tokens.
    pub val: Vec<i64>,
}

impl TextData {
    /// Folder of Tiny Shakespeare under the data folder.
    pub const SHAKESPEARE: &'static str = "tinyshakespeare";
    /// Its file.
    pub const SHAKESPEARE_FILE: &'static str = "input.txt";

    /// Tiny Shakespeare from `<data_dir>/tinyshakespeare/input.txt`; a missing file is
    /// [`DataError::Missing`] naming the path.
    pub fn shakespeare(data_dir: &Path) -> crate::Result<TextData> {
        TextData::load(
            &data_dir
                .join(Self::SHAKESPEARE)
                .join(Self::SHAKESPEARE_FILE),
        )
    }

    /// A UTF-8 text file, tokenized and split; errors name the file.
    pub fn load(path: &Path) -> crate::Result<TextData> {
        let text = std::fs::read_to_string(path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => DataError::Missing {
                path: path.to_path_buf(),
                hint: MISSING_HINT.into(),
            },
            _ => DataError::Io {
                path: path.to_path_buf(),
                source,
            },
        })?;
        TextData::from_text(&text).map_err(|e| match e {
            crate::Error::Invalid(m) => DataError::Mismatch {
                path: PathBuf::from(path),
                detail: m,
            }
            .into(),
            e => e,
        })
    }

    /// `text` tokenized with its own vocabulary; the first 90 % of the tokens (rounded down)
    /// train, the rest validate. A text shorter than 2 characters is an error.
    pub fn from_text(text: &str) -> crate::Result<TextData> {
        let tokenizer = CharTokenizer::from_text(text)
            .map_err(|e| crate::Error::Invalid(format!("text data: {e}")))?;
        let mut train = tokenizer
            .encode(text)
            .map_err(|e| crate::Error::Invalid(e.to_string()))?;
        if train.len() < 2 {
            return Err(crate::Error::Invalid(format!(
                "text data: {} characters; at least 2 are needed for a training and a validation \
                 part",
                train.len()
            )));
        }
        let n = (train.len() * 9 / 10).max(1);
        let val = train.split_off(n);
        Ok(TextData {
            tokenizer,
            train,
            val,
        })
    }

    /// The tokens of `split`.
    pub fn tokens(&self, split: TextSplit) -> &[i64] {
        match split {
            TextSplit::Train => &self.train,
            TextSplit::Val => &self.val,
        }
    }

    /// `batch_size` windows of `block_size + 1` tokens of `split`, each starting at a position
    /// drawn uniformly from `0..=len - block_size - 1` with `g`: inputs `x` and targets `y`
    /// (`x` shifted by one), both `[batch_size, block_size]` i64 tensors on `device`. A split
    /// shorter than `block_size + 1` tokens, or a zero size, is an error.
    pub fn batch(
        &self,
        split: TextSplit,
        batch_size: usize,
        block_size: usize,
        g: &mut Generator,
        device: Device,
    ) -> crate::Result<(Tensor, Tensor)> {
        let data = self.tokens(split);
        if batch_size == 0 || block_size == 0 {
            return Err(crate::Error::Invalid(format!(
                "TextData::batch: batch size and block size must be at least 1, got {batch_size} \
                 and {block_size}"
            )));
        }
        if data.len() <= block_size {
            return Err(crate::Error::Invalid(format!(
                "TextData::batch: the {split:?} split holds {} tokens, fewer than block size + 1 \
                 = {}",
                data.len(),
                block_size + 1
            )));
        }
        let starts = data.len() - block_size;
        let n = batch_size
            .checked_mul(block_size)
            .ok_or_else(|| crate::Error::Invalid("TextData::batch: size overflows".into()))?;
        let mut x = Vec::with_capacity(n);
        let mut y = Vec::with_capacity(n);
        for _ in 0..batch_size {
            let i = uniform_index(g, starts);
            x.extend_from_slice(&data[i..i + block_size]);
            y.extend_from_slice(&data[i + 1..i + 1 + block_size]);
        }
        Ok((
            Tensor::from_vec_i64(x, &[batch_size, block_size], device)?,
            Tensor::from_vec_i64(y, &[batch_size, block_size], device)?,
        ))
    }
}

/// A uniform index in `0..n` (`n ≥ 1`) from one draw of `g` (multiply-shift, bias below 2⁻⁴⁰
/// for any corpus size).
pub fn uniform_index(g: &mut Generator, n: usize) -> usize {
    ((u128::from(g.next_u64()) * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_index_stays_in_range() {
        let mut g = Generator::new(1);
        for n in [1usize, 2, 7, 1000] {
            for _ in 0..100 {
                assert!(uniform_index(&mut g, n) < n);
            }
        }
    }
}
