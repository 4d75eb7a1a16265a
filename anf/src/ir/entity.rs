//! A tiny entity-map library in the style of `cranelift-entity` (which `anf` must not depend on):
//! entities are `u32` newtypes, `PrimaryMap` allocates them, `SecondaryMap` attaches data to them.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// A dense `u32` index into a `PrimaryMap`.
pub trait EntityRef: Copy + Eq {
    /// The entity with index `i`.
    fn new(i: usize) -> Self;
    /// This entity's index.
    fn index(self) -> usize;
}

/// Declares a `u32` entity newtype printed as `{prefix}{index}`.
macro_rules! entity {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl $crate::ir::entity::EntityRef for $name {
            fn new(i: usize) -> Self {
                $name(u32::try_from(i).expect("entity index fits in u32"))
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl $name {
            /// The entity's index as a `u32`.
            pub fn as_u32(self) -> u32 {
                self.0
            }
            /// The entity with index `i`.
            pub fn from_u32(i: u32) -> Self {
                $name(i)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(self, f)
            }
        }
    };
}
pub(crate) use entity;

/// The owner of a set of entities and their primary data.
#[derive(Clone, PartialEq)]
pub struct PrimaryMap<K: EntityRef, V> {
    elems: Vec<V>,
    unused: PhantomData<K>,
}

impl<K: EntityRef, V> PrimaryMap<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        PrimaryMap { elems: Vec::new(), unused: PhantomData }
    }
    /// An empty map with room for `n` entities.
    pub fn with_capacity(n: usize) -> Self {
        PrimaryMap { elems: Vec::with_capacity(n), unused: PhantomData }
    }
    /// Allocates a new entity holding `v`.
    pub fn push(&mut self, v: V) -> K {
        let k = K::new(self.elems.len());
        self.elems.push(v);
        k
    }
    /// The key the next `push` will return.
    pub fn next_key(&self) -> K {
        K::new(self.elems.len())
    }
    /// Number of entities allocated.
    pub fn len(&self) -> usize {
        self.elems.len()
    }
    /// Whether no entity is allocated.
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }
    /// Is `k` an entity of this map?
    pub fn is_valid(&self, k: K) -> bool {
        k.index() < self.elems.len()
    }
    /// The data of `k`, if `k` is allocated.
    pub fn get(&self, k: K) -> Option<&V> {
        self.elems.get(k.index())
    }
    /// The data of `k` mutably, if `k` is allocated.
    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        self.elems.get_mut(k.index())
    }
    /// All keys in allocation order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = K> + ExactSizeIterator + '_ {
        (0..self.elems.len()).map(K::new)
    }
    /// All values in allocation order.
    pub fn values(&self) -> std::slice::Iter<'_, V> {
        self.elems.iter()
    }
    /// All values in allocation order, mutably.
    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, V> {
        self.elems.iter_mut()
    }
    /// All `(key, value)` pairs in allocation order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (K, &V)> + ExactSizeIterator + '_ {
        self.elems.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }
}

impl<K: EntityRef, V> Default for PrimaryMap<K, V> {
    fn default() -> Self {
        PrimaryMap::new()
    }
}

impl<K: EntityRef, V> Index<K> for PrimaryMap<K, V> {
    type Output = V;
    fn index(&self, k: K) -> &V {
        &self.elems[k.index()]
    }
}

impl<K: EntityRef, V> IndexMut<K> for PrimaryMap<K, V> {
    fn index_mut(&mut self, k: K) -> &mut V {
        &mut self.elems[k.index()]
    }
}

impl<K: EntityRef + fmt::Debug, V: fmt::Debug> fmt::Debug for PrimaryMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Secondary data for entities of a `PrimaryMap`; every entity reads as `default` until set.
#[derive(Clone, Debug)]
pub struct SecondaryMap<K: EntityRef, V: Clone> {
    elems: Vec<V>,
    default: V,
    unused: PhantomData<K>,
}

impl<K: EntityRef, V: Clone> SecondaryMap<K, V> {
    /// A map in which every entity reads as `default`.
    pub fn with_default(default: V) -> Self {
        SecondaryMap { elems: Vec::new(), default, unused: PhantomData }
    }
}

impl<K: EntityRef, V: Clone + Default> SecondaryMap<K, V> {
    /// A map in which every entity reads as `V::default()`.
    pub fn new() -> Self {
        SecondaryMap::with_default(V::default())
    }
    /// Like [`SecondaryMap::new`], with room for entities below `n` made up front (no growth
    /// while they are set).
    pub fn sized(n: usize) -> Self {
        SecondaryMap { elems: vec![V::default(); n], default: V::default(), unused: PhantomData }
    }
}

impl<K: EntityRef, V: Clone + Default> Default for SecondaryMap<K, V> {
    fn default() -> Self {
        SecondaryMap::new()
    }
}

impl<K: EntityRef, V: Clone> Index<K> for SecondaryMap<K, V> {
    type Output = V;
    fn index(&self, k: K) -> &V {
        self.elems.get(k.index()).unwrap_or(&self.default)
    }
}

impl<K: EntityRef, V: Clone> IndexMut<K> for SecondaryMap<K, V> {
    fn index_mut(&mut self, k: K) -> &mut V {
        let i = k.index();
        if i >= self.elems.len() {
            self.elems.resize(i + 1, self.default.clone());
        }
        &mut self.elems[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    entity!(
        /// A test entity.
        Thing,
        "th"
    );

    #[test]
    fn primary_and_secondary_maps() {
        let mut m: PrimaryMap<Thing, &str> = PrimaryMap::new();
        let a = m.push("a");
        let b = m.push("b");
        assert_eq!((a.to_string(), b.to_string()), ("th0".to_string(), "th1".to_string()));
        assert_eq!((m[b], b.as_u32()), ("b", 1));
        assert!(m.is_valid(b) && !m.is_valid(Thing::from_u32(2)));
        assert_eq!(m.keys().collect::<Vec<_>>(), vec![a, b]);
        let mut s: SecondaryMap<Thing, u8> = SecondaryMap::new();
        assert_eq!(s[b], 0);
        s[b] = 7;
        assert_eq!((s[a], s[b]), (0, 7));
    }
}
