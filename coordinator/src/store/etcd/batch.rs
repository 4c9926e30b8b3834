//! A batch as etcd writes, and the writes cut into transactions etcd
//! accepts: pure functions over plain data.
//!
//! etcd refuses a transaction with more operations than `--max-txn-ops`
//! (128 by default), a request larger than `--max-request-bytes` (1.5 MiB),
//! or one key written twice. So a batch becomes a list of [`Write`]s with
//! each key once (the last write of a key is what the batch leaves), and
//! the list is cut into [`chunks`] that respect both limits.

use std::collections::HashMap;
use std::ops::Range;

/// A put (`Some`) or a delete (`None`) of one key.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Write {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub value: Option<Vec<u8>>,
}

/// A batch's writes as the write-ahead record holds them.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Writes {
    #[prost(message, repeated, tag = "1")]
    pub writes: Vec<Write>,
}

/// What one etcd transaction may hold, as the cluster is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `--max-txn-ops`.
    pub max_ops: usize,
    /// `--max-request-bytes`.
    pub max_request_bytes: usize,
}

impl Default for Limits {
    /// etcd's defaults.
    fn default() -> Limits {
        Limits {
            max_ops: 128,
            max_request_bytes: 1_572_864,
        }
    }
}

/// Room kept in every request for what is not a write: the leadership
/// compare (a key of the prefix), the request's framing, gRPC's headers.
pub const REQUEST_OVERHEAD_BYTES: usize = 16 << 10;
/// What one write costs in a request beside its key and value (field tags
/// and lengths; generous).
const WRITE_OVERHEAD_BYTES: usize = 32;

impl Limits {
    /// The most bytes of writes one transaction carries.
    pub fn budget(&self) -> usize {
        self.max_request_bytes
            .saturating_sub(REQUEST_OVERHEAD_BYTES)
    }

    /// The largest value one key may hold: a record larger than this can
    /// be written by no transaction, so it is refused before any is sent.
    pub fn max_value_bytes(&self, key_len: usize) -> usize {
        self.budget().saturating_sub(key_len + WRITE_OVERHEAD_BYTES)
    }
}

/// What `w` costs in a request.
pub fn cost(w: &Write) -> usize {
    w.key.len() + w.value.as_ref().map_or(0, Vec::len) + WRITE_OVERHEAD_BYTES
}

/// `writes` with each key once, at the place of its first write and with
/// the value of its last: what applying them in order leaves, in writes
/// that one transaction may hold.
pub fn last_per_key(writes: Vec<Write>) -> Vec<Write> {
    let mut at: HashMap<Vec<u8>, usize> = HashMap::with_capacity(writes.len());
    let mut out: Vec<Write> = Vec::with_capacity(writes.len());
    for w in writes {
        match at.get(&w.key) {
            Some(&i) => out[i].value = w.value,
            None => {
                at.insert(w.key.clone(), out.len());
                out.push(w);
            }
        }
    }
    out
}

/// `writes` cut, in order, into ranges that each fit one transaction of
/// `limits` beside `reserved_ops` operations of the caller's own; `None`
/// when one write alone is larger than any transaction may be (the
/// caller refuses the batch before writing anything).
pub fn chunks(writes: &[Write], limits: Limits, reserved_ops: usize) -> Option<Vec<Range<usize>>> {
    let max_ops = limits.max_ops.saturating_sub(reserved_ops).max(1);
    let budget = limits.budget();
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, w) in writes.iter().enumerate() {
        let c = cost(w);
        if c > budget {
            return None;
        }
        if i > start && (i - start == max_ops || bytes + c > budget) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += c;
    }
    if start < writes.len() {
        out.push(start..writes.len());
    }
    Some(out)
}

/// `bytes` cut into pieces of at most `size` bytes (at least one piece).
pub fn pieces(bytes: &[u8], size: usize) -> Vec<&[u8]> {
    if bytes.is_empty() {
        return vec![bytes];
    }
    bytes.chunks(size.max(1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: usize) -> Write {
        Write {
            key: k.as_bytes().to_vec(),
            value: Some(vec![b'x'; v]),
        }
    }

    #[test]
    fn a_key_written_twice_is_written_once_with_its_last_value() {
        let del = Write {
            key: b"a".to_vec(),
            value: None,
        };
        let out = last_per_key(vec![put("a", 1), put("b", 2), del.clone(), put("c", 3)]);
        assert_eq!(out, vec![del, put("b", 2), put("c", 3)]);
    }

    #[test]
    fn chunks_respect_both_limits_and_keep_the_order() {
        let limits = Limits {
            max_ops: 4,
            max_request_bytes: REQUEST_OVERHEAD_BYTES + 300,
        };
        // 3 ops of the caller leave one write per transaction.
        let w: Vec<_> = (0..5).map(|i| put(&format!("k{i}"), 10)).collect();
        assert_eq!(
            chunks(&w, limits, 3).unwrap(),
            vec![0..1, 1..2, 2..3, 3..4, 4..5]
        );
        // Without them, four per transaction.
        assert_eq!(chunks(&w, limits, 0).unwrap(), vec![0..4, 4..5]);
        // Bytes: each write costs 2 + 100 + 32 = 134, two fit in 300.
        let big: Vec<_> = (0..5).map(|i| put(&format!("k{i}"), 100)).collect();
        assert_eq!(chunks(&big, limits, 0).unwrap(), vec![0..2, 2..4, 4..5]);
        // One write larger than any transaction: refused whole.
        assert_eq!(chunks(&[put("k", 300)], limits, 0), None);
        assert_eq!(chunks(&[], limits, 0).unwrap(), Vec::<Range<usize>>::new());
    }

    #[test]
    fn pieces_cover_the_bytes_exactly() {
        let b: Vec<u8> = (0..10).collect();
        let p = pieces(&b, 4);
        assert_eq!(p.iter().map(|x| x.len()).collect::<Vec<_>>(), vec![4, 4, 2]);
        assert_eq!(p.concat(), b);
        assert_eq!(pieces(&[], 4).len(), 1);
    }
}
