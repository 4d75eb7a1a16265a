//! Runtime values of the reference interpreter, bags and maps with their groups, and printing
//! exactly as docs/language.md §7 says.

use std::cmp::Ordering;
use std::fmt;
use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::syntax::{Pat, E};
use rustc_hash::FxHashMap;

/// A value of an equality type: bag elements and map keys (docs/language.md §4).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Unit,
    Bool(bool),
    Int(i64),
    Tuple(Rc<[Key]>),
}

impl Key {
    pub fn to_value(&self) -> Value {
        match self {
            Key::Unit => Value::Unit,
            Key::Bool(b) => Value::Bool(*b),
            Key::Int(n) => Value::Int(*n),
            Key::Tuple(ks) => Value::Tuple(ks.iter().map(Key::to_value).collect()),
        }
    }
}

/// A multiset with signed multiplicities; zero entries are never stored.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bag {
    pub entries: FxHashMap<Key, i64>,
}

impl Bag {
    /// Adds `n` to `k`'s multiplicity (a key reaching zero is dropped); a sum out of Int's range
    /// is an overflow and leaves the bag as it was.
    pub fn insert(&mut self, k: Key, n: i64) -> Result<(), BagOverflow> {
        if n == 0 {
            return Ok(());
        }
        match self.entries.entry(k) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let sum = e.get().checked_add(n).ok_or(BagOverflow)?;
                if sum == 0 {
                    e.remove();
                } else {
                    *e.get_mut() = sum;
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(n);
            }
        }
        Ok(())
    }
    /// Entries sorted by element: the deterministic order folds and printing use.
    pub fn sorted(&self) -> Vec<(&Key, i64)> {
        let mut v: Vec<(&Key, i64)> = self.entries.iter().map(|(k, n)| (k, *n)).collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }
    /// The sum of two bags (the bag group's operation).
    pub fn merge(&self, other: &Bag) -> Result<Bag, BagOverflow> {
        let mut out = self.clone();
        for (k, n) in &other.entries {
            out.insert(k.clone(), *n)?;
        }
        Ok(out)
    }
    /// Every multiplicity negated (the bag group's inverse).
    pub fn negate(&self) -> Result<Bag, BagOverflow> {
        self.scale(-1)
    }
    /// Every multiplicity times `m`.
    pub fn scale(&self, m: i64) -> Result<Bag, BagOverflow> {
        let mut out = Bag::default();
        for (k, n) in &self.entries {
            out.insert(k.clone(), n.checked_mul(m).ok_or(BagOverflow)?)?;
        }
        Ok(out)
    }
}

/// A bag multiplicity left Int's range: an error in both engines (docs/language.md §8), never a
/// wrap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BagOverflow;

impl BagOverflow {
    /// The located error.
    pub fn at(self, span: frontend::Span) -> frontend::Diagnostic {
        frontend::Diagnostic::error(span, anf::ir::BAG_OVERFLOW_MESSAGE)
    }
}

/// A finite map from keys to values of some group; the group's zero is never stored by group
/// operations (a literal may still hold one until an operation touches it).
#[derive(Clone, Debug, Default)]
pub struct MapV {
    pub entries: FxHashMap<Key, Value>,
}

impl MapV {
    pub fn sorted(&self) -> Vec<(&Key, &Value)> {
        let mut v: Vec<(&Key, &Value)> = self.entries.iter().collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }
}

/// Abelian groups (docs/language.md §6).
#[derive(Clone, Debug)]
pub enum Group {
    Int,
    Real,
    Bag,
    Map(Rc<Group>),
    Pair(Rc<Group>, Rc<Group>),
    /// `group op inverse zero`: promised abelian, not checked.
    User {
        op: Value,
        inverse: Value,
        zero: Value,
    },
}

/// A closure: a one-parameter function literal with its captured environment.
#[derive(Clone)]
pub struct Closure {
    pub param: Rc<Pat>,
    pub body: E,
    pub env: Env,
}

/// Environments are persistent lists: a closure captures one by sharing its spine.
#[derive(Clone, Default)]
pub struct Env(pub Option<Rc<EnvNode>>);

pub struct EnvNode {
    pub id: frontend::syntax::LocalId,
    pub value: Value,
    pub next: Env,
}

impl Env {
    pub fn bind(&self, id: frontend::syntax::LocalId, value: Value) -> Env {
        Env(Some(Rc::new(EnvNode { id, value, next: self.clone() })))
    }
    pub fn get(&self, id: frontend::syntax::LocalId) -> Option<&Value> {
        let mut cur = &self.0;
        while let Some(n) = cur {
            if n.id == id {
                return Some(&n.value);
            }
            cur = &n.next.0;
        }
        None
    }
}

/// Environments and the closures they hold can nest without bound (`iterate n (fun f -> fun x ->
/// f x) g` builds a chain of n closures), so they are freed with a work list: the default
/// recursive drop would overflow the stack on a long chain.
impl Drop for Env {
    fn drop(&mut self) {
        // The tail is followed in a loop; the work list (allocated only when a freed value holds
        // closures) keeps the environments detached from values. Dropping an environment is
        // frequent, so the common case — a shared node, or a chain of plain values — allocates
        // nothing.
        let mut work: Vec<Option<Rc<EnvNode>>> = Vec::new();
        let mut next = self.0.take();
        loop {
            let slot = match next.take() {
                Some(rc) => Some(rc),
                None => match work.pop() {
                    Some(slot) => slot,
                    None => break,
                },
            };
            let Some(rc) = slot else { continue };
            // Only the last owner frees a node; other owners keep it alive.
            let Ok(mut node) = Rc::try_unwrap(rc) else { continue };
            next = node.next.0.take();
            detach_envs(&mut node.value, &mut work);
            // `node` drops here with no environment left inside its value or its tail.
        }
    }
}

/// Moves the environments of the closures uniquely owned by `v` (directly or inside uniquely
/// owned tuples, arrays and partial applications) into `out`, so dropping `v` stays shallow.
fn detach_envs(v: &mut Value, out: &mut Vec<Option<Rc<EnvNode>>>) {
    match v {
        Value::Closure(c) => {
            if let Some(c) = Rc::get_mut(c) {
                out.push(c.env.0.take());
            }
        }
        Value::Tuple(xs) | Value::Partial(_, _, xs) => {
            if let Some(xs) = Rc::get_mut(xs) {
                xs.iter_mut().for_each(|x| detach_envs(x, out));
            }
        }
        Value::Array(xs) => {
            if let Some(xs) = Rc::get_mut(xs) {
                xs.iter_mut().for_each(|x| detach_envs(x, out));
            }
        }
        _ => {}
    }
}

/// The last reference to a counted block gives its bytes back to the [`meter`].
impl Drop for Value {
    fn drop(&mut self) {
        let unique = match self {
            Value::Tuple(xs) => Rc::strong_count(xs) == 1,
            Value::Array(xs) => Rc::strong_count(xs) == 1,
            Value::Bag(b) => Rc::strong_count(b) == 1,
            Value::Map(m) => Rc::strong_count(m) == 1,
            Value::Closure(c) => Rc::strong_count(c) == 1,
            _ => false,
        };
        if unique {
            meter::refund(self.heap_bytes());
        }
    }
}

/// The interpreter's memory meter (docs/language.md §10): the bytes of the tuples, arrays, bags,
/// maps and closures alive, counted when [`Value::tuple`], [`Value::array`], ... make one and
/// when the last `Value` holding it goes. A cheap accounting, not an allocator: blocks made some
/// other way are not counted (their release saturates at zero), and a bag updated in place keeps
/// the count it was made with. The interpreter checks it against the limit as it allocates
/// (`interp::check_memory`); it is per thread.
pub mod meter {
    use std::cell::Cell;

    /// The default limit: the JIT's arena limit (`native::DEFAULT_ARENA_LIMIT`).
    pub const DEFAULT_LIMIT: usize = crate::native::DEFAULT_ARENA_LIMIT;

    thread_local! {
        static LIVE: Cell<usize> = const { Cell::new(0) };
        static LIMIT: Cell<usize> = const { Cell::new(DEFAULT_LIMIT) };
    }

    /// Bytes counted as alive on this thread.
    pub fn live() -> usize {
        LIVE.with(Cell::get)
    }
    /// The limit on this thread.
    pub fn limit() -> usize {
        LIMIT.with(Cell::get)
    }
    /// Sets this thread's limit (`--max-memory`).
    pub fn set_limit(bytes: usize) {
        LIMIT.with(|l| l.set(bytes));
    }
    /// Starts counting from zero (a new evaluation).
    pub fn reset() {
        LIVE.with(|l| l.set(0));
    }
    pub(crate) fn charge(bytes: usize) {
        LIVE.with(|l| l.set(l.get().saturating_add(bytes)));
    }
    pub(crate) fn refund(bytes: usize) {
        LIVE.with(|l| l.set(l.get().saturating_sub(bytes)));
    }
}

/// A change (ILC Sec. 4): `replace v` or `gchange g dv`, for base types.
#[derive(Clone, Debug)]
pub enum Change {
    Replace(Value),
    GChange(Rc<Group>, Value),
}

/// A runtime value.
#[derive(Clone)]
pub enum Value {
    Unit,
    Bool(bool),
    Int(i64),
    Real(f64),
    Tuple(Rc<[Value]>),
    Array(Rc<Vec<Value>>),
    Bag(Rc<Bag>),
    Map(Rc<MapV>),
    Group(Rc<Group>),
    Closure(Rc<Closure>),
    /// A builtin at its (monomorphic) type, applied to fewer arguments than its arity.
    Partial(Builtin, Rc<frontend::types::Type>, Rc<[Value]>),
    /// A dual vector r* of first-order type: the functional v ↦ ⟨r, v⟩ (Mak & Ong `r*`).
    Star(Rc<Value>),
    /// Any other value of a dual or function type that the pullback semantics produces:
    /// a closed term, applied by the interpreter when given an argument.
    Term(E),
    Change(Rc<Change>),
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl Value {
    /// A tuple, counted by the [`meter`].
    pub fn tuple(vs: Vec<Value>) -> Value {
        let v = Value::Tuple(vs.into());
        meter::charge(v.heap_bytes());
        v
    }
    /// An array, counted by the [`meter`].
    pub fn array(vs: Vec<Value>) -> Value {
        let v = Value::Array(Rc::new(vs));
        meter::charge(v.heap_bytes());
        v
    }
    /// A bag, counted by the [`meter`].
    pub fn bag(b: Bag) -> Value {
        let v = Value::Bag(Rc::new(b));
        meter::charge(v.heap_bytes());
        v
    }
    /// A map, counted by the [`meter`].
    pub fn map(m: MapV) -> Value {
        let v = Value::Map(Rc::new(m));
        meter::charge(v.heap_bytes());
        v
    }
    /// A closure, counted by the [`meter`].
    pub fn closure(c: Closure) -> Value {
        let v = Value::Closure(Rc::new(c));
        meter::charge(v.heap_bytes());
        v
    }

    /// The bytes the [`meter`] counts for this value's own heap block (not what it shares).
    fn heap_bytes(&self) -> usize {
        const RC: usize = 2 * std::mem::size_of::<usize>();
        const V: usize = std::mem::size_of::<Value>();
        const K: usize = std::mem::size_of::<Key>();
        match self {
            Value::Tuple(xs) => RC + xs.len() * V,
            Value::Array(xs) => RC + std::mem::size_of::<Vec<Value>>() + xs.len() * V,
            Value::Bag(b) => RC + std::mem::size_of::<Bag>() + b.entries.len() * (K + 16),
            Value::Map(m) => RC + std::mem::size_of::<MapV>() + m.entries.len() * (K + V + 8),
            Value::Closure(_) => RC + std::mem::size_of::<Closure>(),
            _ => 0,
        }
    }

    /// The key of an equality-typed value.
    pub fn to_key(&self) -> Option<Key> {
        Some(match self {
            Value::Unit => Key::Unit,
            Value::Bool(b) => Key::Bool(*b),
            Value::Int(n) => Key::Int(*n),
            Value::Tuple(vs) => Key::Tuple(vs.iter().map(Value::to_key).collect::<Option<Vec<_>>>()?.into()),
            _ => return None,
        })
    }

    /// Structural equality of first-order values (reals compare as IEEE numbers).
    pub fn equals(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Unit, Value::Unit) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Real(a), Value::Real(b)) => a == b,
            (Value::Tuple(a), Value::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.equals(y))
            }
            (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.equals(y))
            }
            (Value::Bag(a), Value::Bag(b)) => a == b,
            // Maps are equal up to zero-valued entries (docs/language.md §10): a key one map lacks
            // must hold a zero in the other.
            (Value::Map(a), Value::Map(b)) => {
                a.entries.iter().all(|(k, v)| b.entries.get(k).map_or_else(|| v.is_zero_entry(), |w| v.equals(w)))
                    && b.entries.iter().all(|(k, w)| a.entries.contains_key(k) || w.is_zero_entry())
            }
            (Value::Star(a), Value::Star(b)) => a.equals(b),
            (Value::Change(a), Value::Change(b)) => match (&**a, &**b) {
                (Change::Replace(x), Change::Replace(y)) => x.equals(y),
                (Change::GChange(_, x), Change::GChange(_, y)) => x.equals(y),
                _ => false,
            },
            _ => false,
        }
    }

    /// Is this map value a zero, as the map's equality ignores: `0`, `0.0` (or `-0.0`), an empty
    /// bag, a map of zeros, a tuple of zeros — the zero of the value type's canonical group.
    pub fn is_zero_entry(&self) -> bool {
        match self {
            Value::Int(n) => *n == 0,
            Value::Real(x) => *x == 0.0,
            Value::Bag(b) => b.entries.is_empty(),
            Value::Map(m) => m.entries.values().all(Value::is_zero_entry),
            Value::Tuple(xs) => xs.iter().all(Value::is_zero_entry),
            _ => false,
        }
    }

    pub fn as_real(&self) -> Option<f64> {
        match self {
            Value::Real(r) => Some(*r),
            _ => None,
        }
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }
}

/// Orders keys of printed bags and maps: by element, as `Key`'s derived order does.
pub fn compare_keys(a: &Key, b: &Key) -> Ordering {
    a.cmp(b)
}

impl fmt::Display for Value {
    /// docs/language.md §7.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Unit => write!(f, "()"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(n) => write!(f, "{n}"),
            Value::Real(r) => write!(f, "{r:?}"),
            Value::Tuple(vs) => {
                write!(f, "(")?;
                for (i, v) in vs.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{v}")?;
                }
                write!(f, ")")
            }
            Value::Array(vs) => {
                write!(f, "[")?;
                for (i, v) in vs.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{v}")?;
                }
                write!(f, "]")
            }
            Value::Bag(b) => {
                write!(f, "bag{{")?;
                for (i, (k, n)) in b.sorted().into_iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{}", k.to_value())?;
                    if n != 1 {
                        write!(f, " # {n}")?;
                    }
                }
                write!(f, "}}")
            }
            Value::Map(m) => {
                write!(f, "map{{")?;
                for (i, (k, v)) in m.sorted().into_iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{} -> {v}", k.to_value())?;
                }
                write!(f, "}}")
            }
            Value::Group(_) => write!(f, "<group>"),
            Value::Closure(_) | Value::Partial(..) => write!(f, "<fun>"),
            Value::Term(e) => write!(f, "{}", crate::interp::pullback::show_term(e)),
            Value::Star(r) => write!(f, "{r}*"),
            Value::Change(c) => match &**c {
                Change::Replace(v) => write!(f, "replace {}", Parens(v)),
                Change::GChange(_, v) => write!(f, "gchange {}", Parens(v)),
            },
        }
    }
}

/// A value as an argument: negative numbers in parentheses, so `replace (-1)` reads back.
struct Parens<'a>(&'a Value);

impl fmt::Display for Parens<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Value::Int(n) if *n < 0 => write!(f, "({n})"),
            Value::Real(r) if r.is_sign_negative() => write!(f, "({r:?})"),
            Value::Change(_) => write!(f, "({})", self.0),
            v => write!(f, "{v}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frontend::syntax::{Expr, ExprKind, Lit, LocalId, PatKind};
    use frontend::types::Type;
    use frontend::Span;

    #[test]
    fn prints_as_the_reference_says() {
        assert_eq!(Value::tuple(vec![Value::Real(660.0), Value::Real(528.0)]).to_string(), "(660.0, 528.0)");
        assert_eq!(
            Value::Star(Rc::new(Value::tuple(vec![Value::Real(660.0), Value::Real(528.0)]))).to_string(),
            "(660.0, 528.0)*"
        );
        assert_eq!(Value::Real(1e-7).to_string(), "1e-7");
        assert_eq!(Value::Real(0.1).to_string(), "0.1");
        let mut b = Bag::default();
        b.insert(Key::Int(5), -1).unwrap();
        b.insert(Key::Int(1), 2).unwrap();
        b.insert(Key::Int(3), 1).unwrap();
        b.insert(Key::Int(3), -1).unwrap();
        assert_eq!(Value::Bag(Rc::new(b)).to_string(), "bag{1 # 2, 5 # -1}");
        let c = Value::Change(Rc::new(Change::GChange(Rc::new(Group::Int), Value::Int(4))));
        assert_eq!(c.to_string(), "gchange 4");
    }

    /// A chain of a million closures, each capturing the previous one (every other one inside a
    /// tuple or a partial application), is freed without recursing once per link: this test runs
    /// on an ordinary test thread, whose stack a recursive drop would overflow.
    #[test]
    fn a_long_closure_chain_drops_without_overflowing_the_stack() {
        let param = Rc::new(Pat { kind: PatKind::Wild, span: Span::SYNTHETIC, ty: Type::Unit, ann: None });
        let body = Expr::new(ExprKind::Lit(Lit::Unit), Span::SYNTHETIC, Type::Unit);
        let mut v = Value::Unit;
        for i in 0..1_000_000u32 {
            let held = match i % 3 {
                0 => v,
                1 => Value::tuple(vec![v, Value::Int(1)]),
                _ => Value::Partial(Builtin::Sin, Rc::new(Type::Unit), Rc::from([v])),
            };
            let env = Env::default().bind(LocalId(i), held);
            v = Value::closure(Closure { param: param.clone(), body: body.clone(), env });
        }
        // A shared tail survives its other owner's drop.
        let shared = v.clone();
        drop(v);
        assert!(matches!(shared, Value::Closure(_)));
        drop(shared);
    }
}
