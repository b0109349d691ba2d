//! A fast hasher for maps and sets keyed by message ids.
//!
//! Ids are small integers the conversation hands out, so SipHash's resistance to crafted keys
//! buys nothing here, while its cost dominated the planner's per-step scan on large sessions.

use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hashing (the FxHash recipe) over whole words.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.write_u64(u64::from(*byte));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(SEED);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }
}

/// The `BuildHasher` for id-keyed collections.
pub type IdBuildHasher = BuildHasherDefault<IdHasher>;

/// A `HashMap` keyed by ids.
pub type IdMap<K, V> = std::collections::HashMap<K, V, IdBuildHasher>;

/// A `HashSet` of ids.
pub type IdSet<K> = std::collections::HashSet<K, IdBuildHasher>;
