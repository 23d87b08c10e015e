//! A bounded, thread-safe cache for decompressed blocks and parsed tables.
//!
//! Two generations per shard: entries go into the young one; when it holds
//! more than its byte budget it becomes the old one (the previous old one is
//! dropped) and a hit in the old one moves the entry back to the young one.
//! Every operation is O(1), recently used entries survive, and a shard never
//! holds more than twice its budget (plus one entry). Shards, chosen by key
//! hash, keep worker threads from contending on one lock.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::{Arc, Mutex};

const SHARDS: usize = 8;

struct Generation<K, V> {
    map: HashMap<K, (Arc<V>, usize)>,
    bytes: usize,
}

impl<K: Hash + Eq, V> Generation<K, V> {
    fn new() -> Self {
        Generation {
            map: HashMap::new(),
            bytes: 0,
        }
    }
}

struct Shard<K, V> {
    young: Generation<K, V>,
    old: Generation<K, V>,
}

pub struct Cache<K, V> {
    shards: Vec<Mutex<Shard<K, V>>>,
    /// Byte budget of one generation of one shard.
    budget: usize,
    hasher: RandomState,
}

impl<K: Hash + Eq + Clone, V> Cache<K, V> {
    /// A cache holding about `bytes` (at most twice that) of entries.
    pub fn new(bytes: usize) -> Self {
        Cache {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        young: Generation::new(),
                        old: Generation::new(),
                    })
                })
                .collect(),
            budget: (bytes / SHARDS / 2).max(1),
            hasher: RandomState::new(),
        }
    }

    fn shard(&self, key: &K) -> std::sync::MutexGuard<'_, Shard<K, V>> {
        let i = (self.hasher.hash_one(key) as usize) % SHARDS;
        // A panic while holding the lock cannot leave a shard inconsistent
        // (every update is a single map operation), so poisoning is ignored.
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        let mut s = self.shard(key);
        if let Some((v, _)) = s.young.map.get(key) {
            return Some(v.clone());
        }
        let (v, size) = s.old.map.remove(key)?;
        s.old.bytes -= size;
        Self::put(&mut s, self.budget, key.clone(), v.clone(), size);
        Some(v)
    }

    /// Stores `value`, which costs `size` bytes, and returns it shared.
    pub fn insert(&self, key: K, value: V, size: usize) -> Arc<V> {
        let v = Arc::new(value);
        let mut s = self.shard(&key);
        Self::put(&mut s, self.budget, key, v.clone(), size);
        v
    }

    fn put(s: &mut Shard<K, V>, budget: usize, key: K, v: Arc<V>, size: usize) {
        let size = size.max(1);
        if let Some((_, old)) = s.young.map.insert(key, (v, size)) {
            s.young.bytes -= old;
        }
        s.young.bytes += size;
        if s.young.bytes > budget {
            s.old = std::mem::replace(&mut s.young, Generation::new());
        }
    }

    /// Bytes held now (for tests).
    pub fn bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock().unwrap_or_else(|p| p.into_inner());
                s.young.bytes + s.old.bytes
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_keeps_recent() {
        let c: Cache<u64, Vec<u8>> = Cache::new(1 << 20);
        for i in 0..10_000u64 {
            c.insert(i, vec![0; 1024], 1024);
            assert!(c.bytes() <= (2 << 20) + SHARDS * 1024, "{}", c.bytes());
        }
        assert!(c.get(&9_999).is_some());
        assert!(c.get(&0).is_none());
        // An entry used all along stays.
        let c: Cache<u64, u64> = Cache::new(64 * 1024);
        c.insert(7, 7, 1);
        for i in 100..100_000u64 {
            c.insert(i, i, 64);
            if i % 50 == 0 {
                assert_eq!(c.get(&7).as_deref(), Some(&7));
            }
        }
    }
}
