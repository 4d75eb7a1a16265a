//! Bags (multisets with signed multiplicities) and finite maps as compiled code sees them:
//! hash tables keyed by the key's memory words (`anf::ir::layout`), with entries listed in
//! sorted key order (signed lexicographic over the words) for deterministic folds and printing.
//! A bag never stores a zero multiplicity; the group-aware "zero value disappears" rule of maps
//! is applied by the compiled code, which knows the group.

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
    /// A multiplicity left Int's range (`anf::ir::TrapCode::BagOverflow`).
    Overflow,
}

impl fmt::Display for CollectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectionError::WidthMismatch { expected, found } => {
                write!(f, "internal error: collection width {found} where {expected} was expected")
            }
            CollectionError::BadWidth(w) => write!(f, "internal error: bad collection width {w}"),
            CollectionError::Overflow => f.write_str(anf::ir::BAG_OVERFLOW_MESSAGE),
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
        // By cases: a variable-length copy would be a call to `memcpy`.
        match *ws {
            [] => Words::Inline(0, [0; INLINE]),
            [a] => Words::Inline(1, [a, 0]),
            [a, b] => Words::Inline(2, [a, b]),
            _ => Words::Heap(ws.into()),
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

// Hashed word by word (one multiply per word with `FxHasher`; the slice's hash would feed its
// bytes through `write`), compared without `memcmp`. Lookups go through `Words` too (`Map::get`
// makes one: inline for short keys), so no `Borrow<[u64]>` needs the slice's hash.
impl Hash for Words {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            // Unused words are zero, so equal keys hash alike.
            Words::Inline(_, a) => {
                state.write_u64(a[0]);
                state.write_u64(a[1]);
            }
            Words::Heap(b) => b.iter().for_each(|w| state.write_u64(*w)),
        }
    }
}

impl PartialEq for Words {
    fn eq(&self, other: &Words) -> bool {
        match (self, other) {
            (Words::Inline(n, a), Words::Inline(m, b)) => n == m && a == b,
            (Words::Heap(a), Words::Heap(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Words {}

impl fmt::Debug for Words {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

/// A key of at most [`INLINE`] words, zero-padded (a bag's keys all have one width, so padding
/// never makes two keys equal). Hashed word by word: one multiply per word with `FxHasher`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Short([u64; INLINE]);

impl Short {
    fn of(ws: &[u64]) -> Short {
        // By cases: a variable-length copy would be a call to `memcpy` per key.
        match *ws {
            [] => Short([0, 0]),
            [a] => Short([a, 0]),
            [a, b, ..] => Short([a, b]),
        }
    }
}

impl Hash for Short {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for w in self.0 {
            state.write_u64(w);
        }
    }
}

/// Inline room for this many entries of one-word keys before a hash table is made.
const SMALL: usize = 4;

/// The few entries of a one-word-key bag or map that has no table yet (or an emptied one): keys
/// and values side by side, found by a linear scan. A change of one word of one document has
/// two; a hash table costs a hash, a probe and a `memset` to empty for each.
#[derive(Clone, Copy, Debug, Default)]
struct Small {
    len: u8,
    keys: [u64; SMALL],
    values: [u64; SMALL],
}

impl Small {
    #[inline]
    fn len(&self) -> usize {
        self.len as usize
    }
    /// The index of `k`, if present.
    #[inline]
    fn find(&self, k: u64) -> Option<usize> {
        self.keys[..self.len()].iter().position(|&x| x == k)
    }
    /// Appends `(k, v)`; `false` (and nothing changes) when full.
    #[inline]
    fn push(&mut self, k: u64, v: u64) -> bool {
        let n = self.len();
        if n == SMALL {
            return false;
        }
        self.keys[n] = k;
        self.values[n] = v;
        self.len += 1;
        true
    }
    /// Removes entry `i` (the last one takes its place).
    #[inline]
    fn remove_at(&mut self, i: usize) {
        let last = self.len() - 1;
        self.keys[i] = self.keys[last];
        self.values[i] = self.values[last];
        self.len -= 1;
    }
    fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.keys[..self.len()].iter().copied().zip(self.values[..self.len()].iter().copied())
    }
}

/// A multiset with signed multiplicities over keys of `key_words` words.
///
/// One-word keys (every `Int` and `Bool`) live in a table of plain words, the first few inline
/// ([`Small`]) until there are more; keys of none or two words (pairs of them) in a table of
/// fixed-size keys; wider keys are boxed. The sorted entry array compiled code folds over is
/// cached until the bag changes (see [`Bag::cached_entries`]).
#[derive(Clone, Debug, Default)]
pub struct Bag {
    key_words: usize,
    short: FxHashMap<Short, i64>,
    /// Keys of one word (every `Bag Int`): plain words, one multiply to hash, 16 bytes an entry.
    /// Empty while the entries fit in `small`; once it holds any, `small` is empty.
    narrow: FxHashMap<u64, i64>,
    /// Up to [`SMALL`] entries of one-word keys while `narrow` is empty (multiplicities as words).
    small: Small,
    wide: FxHashMap<Box<[u64]>, i64>,
    /// The arena array `nabla_bag_entries` last made for this bag, while the bag is unchanged
    /// (the array itself is immutable and lives as long as the bag: both go at `reset`).
    entries_cache: Option<std::ptr::NonNull<u8>>,
    /// Likewise for the unsorted array of `nabla_bag_entries_unordered`.
    unordered_cache: Option<std::ptr::NonNull<u8>>,
    /// Held by an incremental driver's persistent state, which calls read from scratch contexts
    /// reset after each update: entry arrays (made in those arenas) are never cached.
    persistent: bool,
}

impl PartialEq for Bag {
    fn eq(&self, other: &Bag) -> bool {
        // (Entry by entry: equal bags may keep their one-word keys inline or in a table.)
        self.key_words == other.key_words
            && self.len() == other.len()
            && self.entries().all(|(k, n)| other.count(k) == n)
    }
}

impl Eq for Bag {}

impl Bag {
    /// The empty bag of keys `key_words` wide.
    pub fn new(key_words: usize) -> Bag {
        Bag { key_words, ..Bag::default() }
    }

    /// Are this bag's keys stored as [`Short`]s?
    fn is_narrow(&self) -> bool {
        self.key_words == 1
    }

    /// Are this bag's keys of two or no words (stored as [`Short`]s)?
    fn is_short(&self) -> bool {
        self.key_words <= INLINE
    }

    /// The key width in words.
    pub fn key_words(&self) -> usize {
        self.key_words
    }

    /// Number of keys with a nonzero multiplicity.
    pub fn len(&self) -> usize {
        self.short.len() + self.narrow.len() + self.wide.len() + self.small.len()
    }

    /// Is every multiplicity zero?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries the bag's tables have room for (entries kept inline count as their own room).
    pub fn capacity(&self) -> usize {
        self.short.capacity() + self.narrow.capacity() + self.wide.capacity() + self.small.len()
    }

    /// The multiplicity of `key` (0 when absent).
    pub fn count(&self, key: &[u64]) -> i64 {
        if key.len() != self.key_words {
            return 0;
        }
        let found = match key {
            [k] => match self.small.find(*k) {
                Some(i) => return self.small.values[i] as i64,
                None => self.narrow.get(k),
            },
            _ if self.is_short() => self.short.get(&Short::of(key)),
            _ => self.wide.get(key),
        };
        found.copied().unwrap_or(0)
    }

    /// Adds `mult` to `key`'s multiplicity, dropping the key when it reaches zero; a sum out of
    /// Int's range is [`CollectionError::Overflow`] (and leaves the bag as it was).
    #[inline]
    pub fn insert(&mut self, key: &[u64], mult: i64) -> Result<(), CollectionError> {
        if key.len() != self.key_words {
            return Err(CollectionError::WidthMismatch { expected: self.key_words, found: key.len() });
        }
        if mult == 0 {
            return Ok(());
        }
        self.entries_cache = None;
        self.unordered_cache = None;
        if let [k] = key {
            self.add_narrow(*k, mult)?;
        } else if self.is_short() {
            add_count(&mut self.short, Short::of(key), mult)?;
        } else {
            match self.wide.get_mut(key) {
                Some(m) => {
                    *m = m.checked_add(mult).ok_or(CollectionError::Overflow)?;
                    if *m == 0 {
                        self.wide.remove(key);
                    }
                }
                None => {
                    self.wide.insert(key.into(), mult);
                }
            }
        }
        Ok(())
    }

    /// Adds `mult` (not zero) to one-word key `k`: inline while there is room and no table, else
    /// in the table (the inline entries move into it when they overflow).
    #[inline]
    fn add_narrow(&mut self, k: u64, mult: i64) -> Result<(), CollectionError> {
        if self.narrow.is_empty() {
            if let Some(i) = self.small.find(k) {
                let sum = (self.small.values[i] as i64).checked_add(mult).ok_or(CollectionError::Overflow)?;
                if sum == 0 {
                    self.small.remove_at(i);
                } else {
                    self.small.values[i] = sum as u64;
                }
                return Ok(());
            }
            if self.small.push(k, mult as u64) {
                return Ok(());
            }
            self.narrow.reserve(SMALL + 1);
            for (k, n) in self.small.iter() {
                self.narrow.insert(k, n as i64);
            }
            self.small.len = 0;
        }
        add_count(&mut self.narrow, k, mult)
    }

    /// The sum of two bags (the bag group's operation).
    pub fn merge(&self, other: &Bag) -> Result<Bag, CollectionError> {
        if other.key_words != self.key_words {
            return Err(CollectionError::WidthMismatch { expected: self.key_words, found: other.key_words });
        }
        let (mut out, smaller) = if self.len() >= other.len() { (self.clone(), other) } else { (other.clone(), self) };
        out.add_scaled(smaller, 1)?;
        Ok(out)
    }

    /// Adds every entry of `src` times `m` to this bag, in place; an overflow is an error (the
    /// bag is then partly updated: compiled code abandons the call).
    pub fn add_scaled(&mut self, src: &Bag, m: i64) -> Result<(), CollectionError> {
        if src.key_words != self.key_words {
            return Err(CollectionError::WidthMismatch { expected: self.key_words, found: src.key_words });
        }
        if src.is_empty() || m == 0 {
            return Ok(());
        }
        self.entries_cache = None;
        self.unordered_cache = None;
        if self.is_narrow() {
            if src.narrow.len() > SMALL {
                self.narrow.reserve(src.narrow.len());
            }
            for (k, n) in src.small.iter() {
                self.add_narrow(k, (n as i64).checked_mul(m).ok_or(CollectionError::Overflow)?)?;
            }
            // (Not walked when empty: walking even an empty table costs.)
            if !src.narrow.is_empty() {
                for (k, n) in &src.narrow {
                    self.add_narrow(*k, n.checked_mul(m).ok_or(CollectionError::Overflow)?)?;
                }
            }
            Ok(())
        } else if self.is_short() {
            self.short.reserve(src.short.len());
            for (k, n) in &src.short {
                add_count(&mut self.short, *k, n.checked_mul(m).ok_or(CollectionError::Overflow)?)?;
            }
            Ok(())
        } else {
            for (k, n) in &src.wide {
                self.insert(k, n.checked_mul(m).ok_or(CollectionError::Overflow)?)?;
            }
            Ok(())
        }
    }

    /// Would adding every entry of `src` (same width) leave each multiplicity in Int's range?
    pub fn can_add(&self, src: &Bag) -> bool {
        src.entries().all(|(k, n)| self.count(k).checked_add(n).is_some())
    }

    /// Every multiplicity negated (the bag group's inverse); `-(-2^63)` is an overflow.
    pub fn negate(&self) -> Result<Bag, CollectionError> {
        self.scale(-1)
    }

    /// Every multiplicity multiplied by `m` (entries that become zero are dropped); a product out
    /// of Int's range is an overflow.
    pub fn scale(&self, m: i64) -> Result<Bag, CollectionError> {
        let mut out = Bag::new(self.key_words);
        if m == 0 {
            return Ok(out);
        }
        let times = |n: &i64| n.checked_mul(m).ok_or(CollectionError::Overflow);
        out.short = self.short.iter().map(|(k, n)| Ok((*k, times(n)?))).collect::<Result<_, _>>()?;
        out.narrow = self.narrow.iter().map(|(k, n)| Ok((*k, times(n)?))).collect::<Result<_, _>>()?;
        out.small = self.small;
        for v in &mut out.small.values[..self.small.len()] {
            *v = times(&(*v as i64))? as u64;
        }
        out.wide = self.wide.iter().map(|(k, n)| Ok((k.clone(), times(n)?))).collect::<Result<_, _>>()?;
        Ok(out)
    }

    /// `(key, multiplicity)` pairs in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (&[u64], i64)> + '_ {
        let kw = self.key_words.min(INLINE);
        let narrow = self.narrow.iter().map(|(k, m)| (std::slice::from_ref(k), *m));
        let small = self.small.keys[..self.small.len()]
            .iter()
            .zip(&self.small.values[..self.small.len()])
            .map(|(k, m)| (std::slice::from_ref(k), *m as i64));
        self.short
            .iter()
            .map(move |(k, m)| (&k.0[..kw], *m))
            .chain(small)
            .chain(narrow)
            .chain(self.wide.iter().map(|(k, m)| (&k[..], *m)))
    }

    /// `(key, multiplicity)` pairs sorted by key.
    pub fn sorted_entries(&self) -> Vec<(&[u64], i64)> {
        let mut es: Vec<(&[u64], i64)> = self.entries().collect();
        // Keys are distinct, so an unstable sort gives one order.
        es.sort_unstable_by(|a, b| cmp_keys(a.0, b.0));
        es
    }

    /// The entries as records `[key words…, multiplicity]`, sorted by key, written to `out`
    /// (which has room for `len() * (key_words + 1)` words), sorting in `scratch`.
    pub fn write_sorted_records(&self, out: &mut [u64], scratch: &mut SortScratch) {
        let kw = self.key_words;
        if self.is_short() {
            // Integer keys sort by radix, much cheaper than comparing key slices.
            let es = &mut scratch.records;
            es.clear();
            if self.is_narrow() {
                es.extend(self.small.iter().map(|(k, m)| [k ^ SIGN, SIGN, m]));
                es.extend(self.narrow.iter().map(|(k, m)| [k ^ SIGN, SIGN, *m as u64]));
            } else {
                es.extend(self.short.iter().map(|(k, m)| [k.0[0] ^ SIGN, k.0[1] ^ SIGN, *m as u64]));
            }
            sort_short_keys(es, &mut scratch.buffer);
            // By width: a variable-length copy would be a call to `memcpy` per record.
            let records = es.iter().copied();
            match kw {
                0 => out.iter_mut().zip(records).for_each(|(w, [_, _, m])| *w = m),
                1 => out.chunks_exact_mut(2).zip(records).for_each(|(r, [a, _, m])| {
                    r[0] = a ^ SIGN;
                    r[1] = m;
                }),
                _ => out.chunks_exact_mut(3).zip(records).for_each(|(r, [a, b, m])| {
                    r[0] = a ^ SIGN;
                    r[1] = b ^ SIGN;
                    r[2] = m;
                }),
            }
        } else {
            for (rec, (k, m)) in out.chunks_exact_mut(kw + 1).zip(self.sorted_entries()) {
                rec[..kw].copy_from_slice(k);
                rec[kw] = m as u64;
            }
        }
    }

    /// Empties the bag for reuse with keys `key_words` wide, keeping its tables' capacity.
    #[inline]
    pub fn recycle(&mut self, key_words: usize) {
        self.key_words = key_words;
        // (An empty table is not emptied again: that would clear its control bytes.)
        if !self.short.is_empty() {
            self.short.clear();
        }
        if !self.narrow.is_empty() {
            self.narrow.clear();
        }
        if !self.wide.is_empty() {
            self.wide.clear();
        }
        self.small.len = 0;
        self.persistent = false;
        self.entries_cache = None;
        self.unordered_cache = None;
    }

    /// Drops the cached entry arrays (their memory is being freed).
    pub fn forget_cached_entries(&mut self) {
        self.entries_cache = None;
        self.unordered_cache = None;
    }

    /// The entry array made for this bag since it last changed, if any.
    pub fn cached_entries(&self) -> Option<*mut u8> {
        self.entries_cache.map(|p| p.as_ptr())
    }

    /// Remembers the entry array made for this bag as it is now (not for a persistent bag).
    pub fn cache_entries(&mut self, array: *mut u8) {
        if !self.persistent {
            self.entries_cache = std::ptr::NonNull::new(array);
        }
    }

    /// Marks the bag as part of a driver's persistent state: it never caches entry arrays.
    pub fn set_persistent(&mut self) {
        self.persistent = true;
        self.forget_cached_entries();
    }

    /// Is the bag part of a driver's persistent state (which the driver updates in place)?
    pub fn is_persistent(&self) -> bool {
        self.persistent
    }

    /// The unsorted entry array made for this bag since it last changed, if any.
    pub fn cached_unordered_entries(&self) -> Option<*mut u8> {
        self.unordered_cache.map(|p| p.as_ptr())
    }

    /// Remembers the unsorted entry array made for this bag as it is now.
    pub fn cache_unordered_entries(&mut self, array: *mut u8) {
        if !self.persistent {
            self.unordered_cache = std::ptr::NonNull::new(array);
        }
    }

    /// The entries as records `[key words…, multiplicity]` in storage order, written to `out`
    /// (which has room for `len() * (key_words + 1)` words).
    pub fn write_records(&self, out: &mut [u64]) {
        let kw = self.key_words;
        if self.is_narrow() {
            let n = self.small.len();
            for (r, (k, m)) in out.chunks_exact_mut(2).zip(self.small.iter()) {
                r[0] = k;
                r[1] = m;
            }
            if !self.narrow.is_empty() {
                out[2 * n..].chunks_exact_mut(2).zip(&self.narrow).for_each(|(r, (k, m))| {
                    r[0] = *k;
                    r[1] = *m as u64;
                });
            }
        } else if self.is_short() {
            let records = self.short.iter();
            match kw {
                0 => out.iter_mut().zip(records).for_each(|(w, (_, m))| *w = *m as u64),
                _ => out.chunks_exact_mut(3).zip(records).for_each(|(r, (k, m))| {
                    r[0] = k.0[0];
                    r[1] = k.0[1];
                    r[2] = *m as u64;
                }),
            }
        } else {
            for (rec, (k, m)) in out.chunks_exact_mut(kw + 1).zip(&self.wide) {
                rec[..kw].copy_from_slice(k);
                rec[kw] = *m as u64;
            }
        }
    }
}

/// Buffers the entry sort reuses (kept in the call context, so sorting a big bag allocates
/// nothing once a call has sorted one as big).
#[derive(Default)]
pub struct SortScratch {
    records: Vec<[u64; 3]>,
    buffer: Vec<[u64; 3]>,
}

/// Flipping the sign bit maps signed order onto unsigned order.
const SIGN: u64 = 1 << 63;

/// Sorts `[first word, second word, payload]` records by their two (sign-flipped) key words:
/// least-significant-digit radix sort over bytes, skipping the bytes no two keys differ in (keys
/// are usually small integers, so one or two passes per word). Short inputs use a comparison
/// sort. The records' keys are distinct, so the order is the one `cmp_keys` gives.
fn sort_short_keys(es: &mut [[u64; 3]], buf: &mut Vec<[u64; 3]>) {
    if es.len() < 128 {
        es.sort_unstable_by_key(|e| (e[0], e[1]));
        return;
    }
    // Which bits vary among the keys.
    let (first0, first1) = (es[0][0], es[0][1]);
    let (mut vary0, mut vary1) = (0u64, 0u64);
    for e in es.iter() {
        vary0 |= e[0] ^ first0;
        vary1 |= e[1] ^ first1;
    }
    buf.clear();
    buf.resize(es.len(), [0; 3]);
    let mut src_is_es = true;
    // Second word first (least significant), then the first word.
    for (word, vary) in [(1usize, vary1), (0usize, vary0)] {
        for byte in 0..8 {
            let shift = 8 * byte;
            if (vary >> shift) & 0xff == 0 {
                continue;
            }
            let (src, dst): (&[[u64; 3]], &mut [[u64; 3]]) =
                if src_is_es { (&*es, &mut buf[..]) } else { (&buf[..], &mut *es) };
            let mut offsets = [0usize; 256];
            for e in src {
                offsets[((e[word] >> shift) & 0xff) as usize] += 1;
            }
            let mut sum = 0;
            for o in offsets.iter_mut() {
                let c = *o;
                *o = sum;
                sum += c;
            }
            for e in src {
                let d = ((e[word] >> shift) & 0xff) as usize;
                dst[offsets[d]] = *e;
                offsets[d] += 1;
            }
            src_is_es = !src_is_es;
        }
    }
    if !src_is_es {
        es.copy_from_slice(buf);
    }
}

/// Adds `mult` to `key`'s count, dropping it at zero; a sum out of Int's range is an overflow.
#[inline]
fn add_count<K: Hash + Eq>(map: &mut FxHashMap<K, i64>, key: K, mult: i64) -> Result<(), CollectionError> {
    if mult == 0 {
        return Ok(());
    }
    match map.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut e) => {
            let sum = e.get().checked_add(mult).ok_or(CollectionError::Overflow)?;
            if sum == 0 {
                e.remove();
            } else {
                *e.get_mut() = sum;
            }
        }
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(mult);
        }
    }
    Ok(())
}

/// A finite map from keys of `key_words` words to values of `value_words` words.
///
/// Maps of one-word keys to one-word values (an `Int` to an `Int`, a `Real`, a bag or a map: the
/// common case) live in a table of plain words (`narrow`): one multiply to hash a key, no
/// enum to compare, nothing to drop when emptied. Other widths use `entries`.
#[derive(Clone, Debug, Default)]
pub struct Map {
    key_words: usize,
    value_words: usize,
    entries: FxHashMap<Words, Words>,
    /// One-word keys and values; empty while they fit in `small`, which is empty once it holds any.
    narrow: FxHashMap<u64, u64>,
    /// Up to [`SMALL`] entries of one-word keys and values while `narrow` is empty.
    small: Small,
    /// Held by an incremental driver's persistent state (updated in place by its commits).
    persistent: bool,
}

impl PartialEq for Map {
    fn eq(&self, other: &Map) -> bool {
        // (Entry by entry: equal maps may keep their one-word entries inline or in a table.)
        self.key_words == other.key_words
            && self.value_words == other.value_words
            && self.len() == other.len()
            && self.entries().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Eq for Map {}

impl Map {
    /// The empty map with the given widths.
    pub fn new(key_words: usize, value_words: usize) -> Map {
        Map { key_words, value_words, ..Map::default() }
    }

    /// Are this map's entries in the one-word table?
    fn is_narrow(&self) -> bool {
        self.key_words == 1 && self.value_words == 1
    }

    /// Marks the map as part of a driver's persistent state.
    pub fn set_persistent(&mut self) {
        self.persistent = true;
    }

    /// Is the map part of a driver's persistent state (see [`Bag::is_persistent`])?
    pub fn is_persistent(&self) -> bool {
        self.persistent
    }

    /// `(key, value)` pairs in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (&[u64], &[u64])> + '_ {
        let n = self.small.len();
        let small = self.small.keys[..n].iter().zip(&self.small.values[..n]);
        let narrow = small.chain(&self.narrow).map(|(k, v)| (std::slice::from_ref(k), std::slice::from_ref(v)));
        narrow.chain(self.entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
    }

    /// For a map of one-word keys to one-word values, its `(key, value)` pairs in no particular
    /// order (cheaper to walk than [`Map::entries`]); `None` for other widths.
    pub fn word_entries(&self) -> Option<impl Iterator<Item = (u64, u64)> + '_> {
        self.is_narrow().then(|| self.small.iter().chain(self.narrow.iter().map(|(k, v)| (*k, *v))))
    }

    /// The address of every value's words, in no particular order: compaction copies what they
    /// point to and writes the copies' addresses back. They stay valid while the map is not
    /// changed.
    pub fn value_slots(&mut self) -> impl Iterator<Item = *mut u64> + '_ {
        let n = self.small.len();
        let small = self.small.values[..n].iter_mut().map(|v| v as *mut u64);
        let narrow = small.chain(self.narrow.values_mut().map(|v| v as *mut u64));
        narrow.chain(self.entries.values_mut().map(|v| v.as_mut_slice().as_mut_ptr()))
    }

    /// The value at `key`, to update in place.
    #[inline]
    pub fn get_mut(&mut self, key: &[u64]) -> Option<&mut [u64]> {
        if self.is_narrow() {
            return match key {
                [k] => match self.small.find(*k) {
                    Some(i) => Some(std::slice::from_mut(&mut self.small.values[i])),
                    None => self.narrow.get_mut(k).map(std::slice::from_mut),
                },
                _ => None,
            };
        }
        self.entries.get_mut(&Words::new(key)).map(|v| v.as_mut_slice())
    }

    /// The entries as records `[key words…, value words…]`, sorted by key, written to `out`
    /// (which has room for `len() * (key_words + value_words)` words), sorting in `scratch`.
    pub fn write_sorted_records(&self, out: &mut [u64], scratch: &mut SortScratch) {
        let (kw, vw) = (self.key_words, self.value_words);
        let rec = kw + vw;
        if rec == 0 {
            return;
        }
        let write = |r: &mut [u64], k: &[u64], v: &[u64]| {
            r[..kw].copy_from_slice(k);
            r[kw..].copy_from_slice(v);
        };
        if self.is_narrow() && self.len() <= 1 {
            let first = self.small.iter().next().or_else(|| self.narrow.iter().next().map(|(k, v)| (*k, *v)));
            if let (Some((k, v)), [a, b, ..]) = (first, out) {
                (*a, *b) = (k, v);
            }
        } else if self.len() <= 1 {
            for (r, (k, v)) in out.chunks_exact_mut(rec).zip(self.entries()) {
                write(r, k, v);
            }
        } else if self.is_narrow() {
            // One-word keys sort by radix; the payload is the value itself.
            let es = &mut scratch.records;
            es.clear();
            es.extend(self.small.iter().map(|(k, v)| [k ^ SIGN, SIGN, v]));
            es.extend(self.narrow.iter().map(|(k, v)| [k ^ SIGN, SIGN, *v]));
            sort_short_keys(es, &mut scratch.buffer);
            for (r, [a, _, v]) in out.chunks_exact_mut(2).zip(es.iter().copied()) {
                r[0] = a ^ SIGN;
                r[1] = v;
            }
        } else if kw <= INLINE {
            // Keys of up to two words sort by radix, as bags' do; the payload is the value's address.
            let es = &mut scratch.records;
            es.clear();
            es.extend(self.entries.iter().map(|(k, v)| {
                let k = Short::of(k.as_slice()).0;
                [k[0] ^ SIGN, k[1] ^ SIGN, v.as_slice().as_ptr() as u64]
            }));
            sort_short_keys(es, &mut scratch.buffer);
            for (r, [a, b, v]) in out.chunks_exact_mut(rec).zip(es.iter().copied()) {
                let key = [a ^ SIGN, b ^ SIGN];
                // SAFETY: `v` is the address of a value of this map, which is not changed meanwhile.
                let value = unsafe { std::slice::from_raw_parts(v as *const u64, vw) };
                write(r, &key[..kw], value);
            }
        } else {
            for (r, (k, v)) in out.chunks_exact_mut(rec).zip(self.sorted_entries()) {
                write(r, k, v);
            }
        }
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
        self.narrow.len() + self.entries.len() + self.small.len()
    }

    /// Has the map no keys?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries the map's tables have room for (entries kept inline count as their own room).
    pub fn capacity(&self) -> usize {
        self.narrow.capacity() + self.entries.capacity() + self.small.len()
    }

    /// The value at `key`.
    pub fn get(&self, key: &[u64]) -> Option<&[u64]> {
        if self.is_narrow() {
            return match key {
                [k] => match self.small.find(*k) {
                    Some(i) => Some(std::slice::from_ref(&self.small.values[i])),
                    None => self.narrow.get(k).map(std::slice::from_ref),
                },
                _ => None,
            };
        }
        self.entries.get(&Words::new(key)).map(|v| v.as_slice())
    }

    /// Binds `key` to `value`.
    pub fn set(&mut self, key: &[u64], value: &[u64]) -> Result<(), CollectionError> {
        if key.len() != self.key_words {
            return Err(CollectionError::WidthMismatch { expected: self.key_words, found: key.len() });
        }
        if value.len() != self.value_words {
            return Err(CollectionError::WidthMismatch { expected: self.value_words, found: value.len() });
        }
        if let ([k], [v]) = (key, value) {
            *self.narrow_slot(*k).0 = *v;
            return Ok(());
        }
        // One hash and probe (keys of up to two words are inline, so making one is cheap).
        match self.entries.entry(Words::new(key)) {
            std::collections::hash_map::Entry::Occupied(mut e) => e.get_mut().as_mut_slice().copy_from_slice(value),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(Words::new(value));
            }
        }
        Ok(())
    }

    /// The value at `key` to update in place, bound first to zero words if `key` is unbound
    /// (then `true`): one hash and probe where `get_mut` then `set` would take two.
    #[inline]
    pub fn slot(&mut self, key: &[u64]) -> Result<(&mut [u64], bool), CollectionError> {
        if key.len() != self.key_words {
            return Err(CollectionError::WidthMismatch { expected: self.key_words, found: key.len() });
        }
        let vw = self.value_words;
        if let [k] = key {
            if vw == 1 {
                let (v, new) = self.narrow_slot(*k);
                return Ok((std::slice::from_mut(v), new));
            }
        }
        Ok(match self.entries.entry(Words::new(key)) {
            std::collections::hash_map::Entry::Occupied(e) => (e.into_mut().as_mut_slice(), false),
            std::collections::hash_map::Entry::Vacant(e) => {
                let v =
                    if vw <= INLINE { Words::Inline(vw as u8, [0; INLINE]) } else { Words::Heap(vec![0; vw].into()) };
                (e.insert(v).as_mut_slice(), true)
            }
        })
    }

    /// Adds `n` (wrapping, as Int arithmetic) to the one-word value at `key`, an unbound key
    /// counting as zero; the key is unbound if the sum is zero. One probe for one-word maps.
    #[inline]
    pub fn add_int(&mut self, key: &[u64], n: u64) -> Result<(), CollectionError> {
        if self.value_words != 1 {
            return Err(CollectionError::WidthMismatch { expected: 1, found: self.value_words });
        }
        if let ([k], true) = (key, self.is_narrow()) {
            self.add_narrow_int(*k, n);
            return Ok(());
        }
        let (cur, _) = self.slot(key)?;
        let sum = cur[0].wrapping_add(n);
        cur[0] = sum;
        if sum == 0 {
            self.remove(key);
        }
        Ok(())
    }

    /// `self ⊕ src` in `mapGroup intGroup`, in place: each value of `src` is added (wrapping, as
    /// Int arithmetic) to the value at its key, an unbound key counting as zero; a key whose sum
    /// is zero is unbound. Both maps must hold one-word values and keys of one width.
    pub fn add_ints(&mut self, src: &Map) -> Result<(), CollectionError> {
        if src.key_words != self.key_words || src.value_words != 1 || self.value_words != 1 {
            let found = if src.key_words != self.key_words { src.key_words } else { src.value_words };
            return Err(CollectionError::WidthMismatch { expected: self.key_words, found });
        }
        if self.is_narrow() {
            // One probe per key of `src` (same widths: `src` is narrow too).
            for (k, v) in src.small.iter() {
                self.add_narrow_int(k, v);
            }
            if !src.narrow.is_empty() {
                for (&k, &v) in &src.narrow {
                    self.add_narrow_int(k, v);
                }
            }
            return Ok(());
        }
        for (k, v) in src.entries() {
            self.add_int(k, v[0])?;
        }
        Ok(())
    }

    /// The value at one-word key `k` of a map of one-word values, bound first to zero if `k` is
    /// unbound (then `true`): inline while there is room and no table, else in the table (the
    /// inline entries move into it when they overflow).
    #[inline]
    fn narrow_slot(&mut self, k: u64) -> (&mut u64, bool) {
        if self.narrow.is_empty() {
            if let Some(i) = self.small.find(k) {
                return (&mut self.small.values[i], false);
            }
            if self.small.push(k, 0) {
                let last = self.small.len() - 1;
                return (&mut self.small.values[last], true);
            }
            self.spill();
        }
        match self.narrow.entry(k) {
            std::collections::hash_map::Entry::Occupied(e) => (e.into_mut(), false),
            std::collections::hash_map::Entry::Vacant(e) => (e.insert(0), true),
        }
    }

    /// Moves the inline entries into the (empty) table: they overflowed.
    fn spill(&mut self) {
        self.narrow.reserve(2 * SMALL);
        for (k, v) in self.small.iter() {
            self.narrow.insert(k, v);
        }
        self.small.len = 0;
    }

    /// Adds `n` (wrapping) to the value at one-word key `k` of a map of one-word values, an
    /// unbound key counting as zero; the key is unbound if the sum is zero.
    #[inline]
    fn add_narrow_int(&mut self, k: u64, n: u64) {
        if self.narrow.is_empty() {
            if let Some(i) = self.small.find(k) {
                let sum = self.small.values[i].wrapping_add(n);
                if sum == 0 {
                    self.small.remove_at(i);
                } else {
                    self.small.values[i] = sum;
                }
                return;
            }
            if n == 0 || self.small.push(k, n) {
                return;
            }
            self.spill();
        }
        match self.narrow.entry(k) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let sum = e.get().wrapping_add(n);
                if sum == 0 {
                    e.remove();
                } else {
                    *e.get_mut() = sum;
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                if n != 0 {
                    e.insert(n);
                }
            }
        }
    }

    /// Empties the map for reuse with the given widths, keeping its tables' capacity.
    pub fn recycle(&mut self, key_words: usize, value_words: usize) {
        self.key_words = key_words;
        self.value_words = value_words;
        // (An empty table is not emptied again: that would clear its control bytes.)
        if !self.entries.is_empty() {
            self.entries.clear();
        }
        if !self.narrow.is_empty() {
            self.narrow.clear();
        }
        self.small.len = 0;
        self.persistent = false;
    }

    /// Unbinds `key` (nothing happens if it is absent).
    pub fn remove(&mut self, key: &[u64]) {
        if self.is_narrow() {
            if let [k] = key {
                match self.small.find(*k) {
                    Some(i) => self.small.remove_at(i),
                    None => {
                        self.narrow.remove(k);
                    }
                }
            }
            return;
        }
        self.entries.remove(&Words::new(key));
    }

    /// `(key, value)` pairs sorted by key.
    pub fn sorted_entries(&self) -> Vec<(&[u64], &[u64])> {
        let mut es: Vec<(&[u64], &[u64])> = self.entries().collect();
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
        // Multiplicities are checked, like the interpreter's: an overflow is an error.
        let mut big = Bag::new(0);
        big.insert(&[], i64::MIN).unwrap();
        assert_eq!(big.insert(&[], -1), Err(CollectionError::Overflow));
        assert_eq!(big.count(&[]), i64::MIN, "a failed insert leaves the bag as it was");
        assert_eq!(big.negate(), Err(CollectionError::Overflow));
        assert_eq!(big.scale(2), Err(CollectionError::Overflow));
        assert_eq!(big.scale(1).unwrap().count(&[]), i64::MIN);
        assert!(big.scale(0).unwrap().is_empty());
        let mut wide = Bag::new(3);
        wide.insert(&[1, 2, 3], i64::MAX).unwrap();
        assert_eq!(wide.insert(&[1, 2, 3], 1), Err(CollectionError::Overflow));
        assert_eq!(wide.clone().add_scaled(&wide, 2), Err(CollectionError::Overflow));
        assert!(!wide.can_add(&wide) && wide.can_add(&wide.negate().unwrap()));
        assert_eq!(a.merge(&Bag::new(2)), Err(CollectionError::WidthMismatch { expected: 1, found: 2 }));
    }

    #[test]
    fn sorted_records_follow_signed_key_order() {
        // Enough keys for the radix sort, with negatives, gaps and both words varying.
        for kw in [1usize, 2] {
            let mut b = Bag::new(kw);
            let mut x: u64 = 12345;
            for i in 0..3000i64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let k0 = (x >> 33) as i64 % 2001 - 1000;
                let key = [k0 as u64, (i % 7 - 3) as u64];
                b.insert(&key[..kw], i % 5 - 2).unwrap();
            }
            let n = b.len();
            let mut out = vec![0u64; n * (kw + 1)];
            b.write_sorted_records(&mut out, &mut SortScratch::default());
            let expected: Vec<u64> =
                b.sorted_entries().iter().flat_map(|(k, m)| k.iter().copied().chain([*m as u64])).collect();
            assert_eq!(out, expected, "width {kw}");
            assert!(n > 128, "the radix path ran");
        }
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
