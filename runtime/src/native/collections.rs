//! Bags (multisets with signed multiplicities) and finite maps as compiled code sees them:
//! hash tables keyed by the key's memory words (`anf::ir::layout`), with entries listed in
//! sorted key order (signed lexicographic over the words) for deterministic folds and printing.
//! A bag never stores a zero multiplicity; the group-aware "zero value disappears" rule of maps
//! is applied by the compiled code, which knows the group.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use rustc_hash::FxHashMap;

/// Why a collection operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CollectionError {
    /// Two collections (or a key) with different key widths met.
    WidthMismatch { expected: usize, found: usize },
    /// A width that is negative or absurdly large.
    BadWidth(i64),
}

impl fmt::Display for CollectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectionError::WidthMismatch { expected, found } => {
                write!(f, "internal error: collection width {found} where {expected} was expected")
            }
            CollectionError::BadWidth(w) => write!(f, "internal error: bad collection width {w}"),
        }
    }
}

/// The widest key or value a collection accepts, in words.
const MAX_WIDTH: i64 = 1 << 16;

/// Checks a width passed from compiled code.
pub fn width(w: i64) -> Result<usize, CollectionError> {
    if (0..=MAX_WIDTH).contains(&w) {
        Ok(w as usize)
    } else {
        Err(CollectionError::BadWidth(w))
    }
}

/// Orders keys as the language orders `Int`, `Bool` and tuples of them.
pub fn cmp_keys(a: &[u64], b: &[u64]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match (*x as i64).cmp(&(*y as i64)) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    a.len().cmp(&b.len())
}

/// Keys this wide or narrower are stored without a heap allocation of their own.
const INLINE: usize = 2;

/// A key's (or value's) words: inline when short (most keys are one `Int` or a pair), else boxed.
#[derive(Clone)]
pub enum Words {
    Inline(u8, [u64; INLINE]),
    Heap(Box<[u64]>),
}

impl Words {
    /// The words of `ws`.
    pub fn new(ws: &[u64]) -> Words {
        if ws.len() <= INLINE {
            let mut a = [0; INLINE];
            a[..ws.len()].copy_from_slice(ws);
            Words::Inline(ws.len() as u8, a)
        } else {
            Words::Heap(ws.into())
        }
    }
    /// The words as a slice.
    pub fn as_slice(&self) -> &[u64] {
        match self {
            Words::Inline(n, a) => &a[..*n as usize],
            Words::Heap(b) => b,
        }
    }
    /// The words, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u64] {
        match self {
            Words::Inline(n, a) => &mut a[..*n as usize],
            Words::Heap(b) => b,
        }
    }
}

impl Borrow<[u64]> for Words {
    fn borrow(&self) -> &[u64] {
        self.as_slice()
    }
}

// Hashing and equality are the slice's, as `Borrow` requires.
impl Hash for Words {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl PartialEq for Words {
    fn eq(&self, other: &Words) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Words {}

impl fmt::Debug for Words {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

/// A multiset with signed multiplicities over keys of `key_words` words.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bag {
    key_words: usize,
    counts: FxHashMap<Words, i64>,
}

impl Bag {
    /// The empty bag of keys `key_words` wide.
    pub fn new(key_words: usize) -> Bag {
        Bag { key_words, counts: FxHashMap::default() }
    }

    /// The key width in words.
    pub fn key_words(&self) -> usize {
        self.key_words
    }

    /// Number of keys with a nonzero multiplicity.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Is every multiplicity zero?
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The multiplicity of `key` (0 when absent).
    pub fn count(&self, key: &[u64]) -> i64 {
        self.counts.get(key).copied().unwrap_or(0)
    }

    /// Adds `mult` to `key`'s multiplicity (wrapping, as Int arithmetic and the interpreter's bags
    /// do), dropping the key when it reaches zero.
    pub fn insert(&mut self, key: &[u64], mult: i64) -> Result<(), CollectionError> {
        if key.len() != self.key_words {
            return Err(CollectionError::WidthMismatch { expected: self.key_words, found: key.len() });
        }
        if mult == 0 {
            return Ok(());
        }
        match self.counts.get_mut(key) {
            Some(m) => {
                let sum = m.wrapping_add(mult);
                if sum == 0 {
                    self.counts.remove(key);
                } else {
                    *m = sum;
                }
            }
            None => {
                self.counts.insert(Words::new(key), mult);
            }
        }
        Ok(())
    }

    /// The sum of two bags (the bag group's operation).
    pub fn merge(&self, other: &Bag) -> Result<Bag, CollectionError> {
        if other.key_words != self.key_words {
            return Err(CollectionError::WidthMismatch { expected: self.key_words, found: other.key_words });
        }
        let (mut out, smaller) = if self.len() >= other.len() { (self.clone(), other) } else { (other.clone(), self) };
        for (k, m) in &smaller.counts {
            out.insert(k.as_slice(), *m)?;
        }
        Ok(out)
    }

    /// Every multiplicity negated, wrapping (the bag group's inverse).
    pub fn negate(&self) -> Result<Bag, CollectionError> {
        let mut out = Bag::new(self.key_words);
        for (k, m) in &self.counts {
            out.counts.insert(k.clone(), m.wrapping_neg());
        }
        Ok(out)
    }

    /// Every multiplicity multiplied by `m`, wrapping; entries that become zero are dropped.
    pub fn scale(&self, m: i64) -> Bag {
        let mut out = Bag::new(self.key_words);
        for (k, n) in &self.counts {
            let p = n.wrapping_mul(m);
            if p != 0 {
                out.counts.insert(k.clone(), p);
            }
        }
        out
    }

    /// `(key, multiplicity)` pairs in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (&[u64], i64)> + '_ {
        self.counts.iter().map(|(k, m)| (k.as_slice(), *m))
    }

    /// `(key, multiplicity)` pairs sorted by key.
    pub fn sorted_entries(&self) -> Vec<(&[u64], i64)> {
        let mut es: Vec<(&[u64], i64)> = self.entries().collect();
        // Keys are distinct, so an unstable sort gives one order.
        es.sort_unstable_by(|a, b| cmp_keys(a.0, b.0));
        es
    }
}

/// A finite map from keys of `key_words` words to values of `value_words` words.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Map {
    key_words: usize,
    value_words: usize,
    entries: FxHashMap<Words, Words>,
}

impl Map {
    /// The empty map with the given widths.
    pub fn new(key_words: usize, value_words: usize) -> Map {
        Map { key_words, value_words, entries: FxHashMap::default() }
    }

    /// The key width in words.
    pub fn key_words(&self) -> usize {
        self.key_words
    }

    /// The value width in words.
    pub fn value_words(&self) -> usize {
        self.value_words
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Has the map no keys?
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value at `key`.
    pub fn get(&self, key: &[u64]) -> Option<&[u64]> {
        self.entries.get(key).map(|v| v.as_slice())
    }

    /// Binds `key` to `value`.
    pub fn set(&mut self, key: &[u64], value: &[u64]) -> Result<(), CollectionError> {
        if key.len() != self.key_words {
            return Err(CollectionError::WidthMismatch { expected: self.key_words, found: key.len() });
        }
        if value.len() != self.value_words {
            return Err(CollectionError::WidthMismatch { expected: self.value_words, found: value.len() });
        }
        match self.entries.get_mut(key) {
            Some(v) => v.as_mut_slice().copy_from_slice(value),
            None => {
                self.entries.insert(Words::new(key), Words::new(value));
            }
        }
        Ok(())
    }

    /// Unbinds `key` (nothing happens if it is absent).
    pub fn remove(&mut self, key: &[u64]) {
        self.entries.remove(key);
    }

    /// `(key, value)` pairs sorted by key.
    pub fn sorted_entries(&self) -> Vec<(&[u64], &[u64])> {
        let mut es: Vec<(&[u64], &[u64])> = self.entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
        // Keys are distinct, so an unstable sort gives one order.
        es.sort_unstable_by(|a, b| cmp_keys(a.0, b.0));
        es
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bags_have_signed_multiplicities_and_drop_zeros() {
        let mut a = Bag::new(1);
        a.insert(&[1], 2).unwrap();
        a.insert(&[5], -1).unwrap();
        a.insert(&[(-3i64) as u64], 1).unwrap();
        let mut b = Bag::new(1);
        b.insert(&[5], 1).unwrap();
        b.insert(&[2], 4).unwrap();
        let m = a.merge(&b).unwrap();
        let listed: Vec<(i64, i64)> = m.sorted_entries().iter().map(|(k, n)| (k[0] as i64, *n)).collect();
        assert_eq!(listed, vec![(-3, 1), (1, 2), (2, 4)]);
        assert_eq!(m.negate().unwrap().count(&[2]), -4);
        assert_eq!(m.merge(&m.negate().unwrap()).unwrap(), Bag::new(1));
        assert_eq!(a.insert(&[1, 2], 1), Err(CollectionError::WidthMismatch { expected: 1, found: 2 }));
        // Multiplicities wrap, like the interpreter's.
        let mut big = Bag::new(0);
        big.insert(&[], i64::MAX).unwrap();
        big.insert(&[], 1).unwrap();
        assert_eq!(big.count(&[]), i64::MIN);
        assert_eq!(big.negate().unwrap().count(&[]), i64::MIN);
        assert_eq!(big.scale(2).len(), 0, "MIN * 2 wraps to 0 and is dropped");
        assert_eq!(a.merge(&Bag::new(2)), Err(CollectionError::WidthMismatch { expected: 1, found: 2 }));
    }

    #[test]
    fn maps_set_get_remove_in_key_order() {
        let mut m = Map::new(2, 1);
        m.set(&[1, 0], &[10]).unwrap();
        m.set(&[0, 5], &[20]).unwrap();
        m.set(&[1, 0], &[30]).unwrap();
        assert_eq!(m.get(&[1, 0]), Some(&[30u64][..]));
        let keys: Vec<&[u64]> = m.sorted_entries().iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, vec![&[0u64, 5][..], &[1, 0][..]]);
        m.remove(&[0, 5]);
        assert_eq!(m.len(), 1);
        assert!(m.set(&[1], &[1]).is_err() && m.set(&[1, 1], &[]).is_err());
        assert_eq!(width(-1), Err(CollectionError::BadWidth(-1)));
    }
}
