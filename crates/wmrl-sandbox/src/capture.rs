//! Bounded capture of a child's stdout or stderr: the first bytes and the last
//! few KiB are kept, the middle is read and counted but dropped, so a flood of
//! output neither blocks the child on a full pipe nor fills the parent's memory,
//! and the final error message (at the end) is never lost.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes kept from the end of a stream besides its head.
pub const TAIL_BYTES: usize = 4096;

/// What a stream carried.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captured {
    /// The kept bytes, decoded lossily as UTF-8: the head, and when bytes were
    /// dropped, a marker line and the last [`TAIL_BYTES`].
    pub text: String,
    /// Bytes the stream carried in total.
    pub total_bytes: u64,
    /// Whether bytes were dropped.
    pub truncated: bool,
}

/// Reads `reader` to its end, keeping at most `keep` bytes of head plus the tail.
pub(crate) async fn capture<R: AsyncRead + Unpin>(mut reader: R, keep: usize) -> Captured {
    let mut head = Vec::with_capacity(keep.min(8192));
    let mut tail: Vec<u8> = Vec::new();
    let mut total = 0u64;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                let room = keep.saturating_sub(head.len());
                let taken = n.min(room);
                head.extend_from_slice(&buf[..taken]);
                tail.extend_from_slice(&buf[taken..n]);
                if tail.len() > 2 * TAIL_BYTES {
                    tail.drain(..tail.len() - TAIL_BYTES);
                }
            }
        }
    }
    if tail.len() > TAIL_BYTES {
        tail.drain(..tail.len() - TAIL_BYTES);
    }
    let kept = (head.len() + tail.len()) as u64;
    let truncated = total > kept;
    let mut text = String::from_utf8_lossy(&head).into_owned();
    if truncated {
        text.push_str(&format!("\n[... {} bytes dropped ...]\n", total - kept));
    }
    text.push_str(&String::from_utf8_lossy(&tail));
    Captured {
        text,
        total_bytes: total,
        truncated,
    }
}

/// `text` made safe for a terminal: control characters (escape sequences
/// included) shown escaped, newlines and tabs kept, and at most `max_chars`
/// characters, the cut marked with `…`. For anything a solution wrote.
pub fn printable(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n >= max_chars {
            out.push('…');
            break;
        }
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_control_characters_and_bounds_length() {
        assert_eq!(printable("a\x1b[2Jb\nc", 100), "a\\u{1b}[2Jb\nc");
        assert_eq!(printable("abcdef", 3), "abc…");
    }

    #[tokio::test]
    async fn keeps_head_and_tail_and_counts_the_rest() {
        let mut data = vec![b'x'; 100_000];
        data.extend_from_slice(b"END");
        let captured = capture(&data[..], 10).await;
        assert!(captured.text.starts_with("xxxxxxxxxx\n[... "));
        assert!(captured.text.ends_with("xEND"));
        assert_eq!(captured.total_bytes, 100_003);
        assert!(captured.truncated);
        assert!(captured.text.len() < 10 + TAIL_BYTES + 64);
        let small = capture(&b"hello"[..], 10).await;
        assert_eq!(small.text, "hello");
        assert!(!small.truncated);
    }
}
