//! The generator of random well-typed programs shared by `jit_differential.rs` (seeded) and the
//! `pipeline` fuzz target (`fuzz/`, steered by the fuzzer's bytes through [`Rng::from_bytes`]),
//! and the runner that evaluates one under the interpreter and compiled, with `anf::opt` on and
//! off ([`both_engines`]). See `jit_differential.rs` for what the programs cover.

#![allow(dead_code)]

use std::fmt::Write;

/// SplitMix64: a small deterministic generator (no dependency, same sequence everywhere).
pub struct Rng {
    state: u64,
    /// When set, draws come from these bytes (a fuzzer's input), two at a time, and are 0 once
    /// they run out (the generator's bounds make every program finite anyway).
    bytes: Option<(Vec<u8>, usize)>,
}

impl Rng {
    /// The SplitMix64 sequence from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed, bytes: None }
    }
    /// Draws read from `data`: a coverage-guided fuzzer steers every choice.
    pub fn from_bytes(data: &[u8]) -> Rng {
        Rng { state: 0, bytes: Some((data.to_vec(), 0)) }
    }
    fn next(&mut self) -> u64 {
        if let Some((data, i)) = &mut self.bytes {
            let lo = data.get(*i).copied().unwrap_or(0) as u64;
            let hi = data.get(*i + 1).copied().unwrap_or(0) as u64;
            *i += 2;
            return lo | hi << 8;
        }
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The types programs are generated at.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    Int,
    Real,
    Bool,
    Pair(Box<Ty>, Box<Ty>),
    Arr(Box<Ty>),
    /// `Bag Int`
    Bag,
    /// `Map Int Int`
    Map,
    /// `Map Int (Bag Int)`
    MapBag,
    /// `Bag k` for a tuple key `k` (two or more words: `Int * Int`, `Int * (Bool * Int)`).
    KBag(Box<Ty>),
    /// `Map k v` for a key `k` (`Int` or a tuple) and a value with a canonical group: `Real`,
    /// `Int * Real`, or `Bag (Int * Int)`.
    KMap(Box<Ty>, Box<Ty>),
    Fun(Box<Ty>, Box<Ty>),
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ty::Int => write!(f, "Int"),
            Ty::Real => write!(f, "Real"),
            Ty::Bool => write!(f, "Bool"),
            Ty::Pair(a, b) => write!(f, "({a} * {b})"),
            Ty::Arr(a) => write!(f, "(Array {a})"),
            Ty::Bag => write!(f, "(Bag Int)"),
            Ty::Map => write!(f, "(Map Int Int)"),
            Ty::MapBag => write!(f, "(Map Int (Bag Int))"),
            Ty::KBag(k) => write!(f, "(Bag {k})"),
            Ty::KMap(k, v) => write!(f, "(Map {k} {v})"),
            Ty::Fun(a, b) => write!(f, "({a} -> {b})"),
        }
    }
}

fn fun(a: Ty, b: Ty) -> Ty {
    Ty::Fun(Box::new(a), Box::new(b))
}
fn arr(a: Ty) -> Ty {
    Ty::Arr(Box::new(a))
}
fn pair(a: Ty, b: Ty) -> Ty {
    Ty::Pair(Box::new(a), Box::new(b))
}
fn kbag(k: Ty) -> Ty {
    Ty::KBag(Box::new(k))
}
fn kmap(k: Ty, v: Ty) -> Ty {
    Ty::KMap(Box::new(k), Box::new(v))
}

/// The tuple keys of bags and maps: two words, and three (wider than a bag's fixed-size slot).
fn tuple_key(i: u64) -> Ty {
    match i % 3 {
        0 => pair(Ty::Int, Ty::Int),
        1 => pair(Ty::Int, pair(Ty::Bool, Ty::Int)),
        _ => pair(pair(Ty::Int, Ty::Int), pair(Ty::Int, Ty::Int)),
    }
}

/// The group of a `KMap` value type.
fn value_group(v: &Ty) -> &'static str {
    match v {
        Ty::Real => "realGroup",
        Ty::Pair(..) => "(pairGroup intGroup realGroup)",
        _ => "bagGroup",
    }
}

pub struct Gen {
    pub rng: Rng,
    /// Variables in scope with their types.
    pub env: Vec<(String, Ty)>,
    pub fresh: u32,
    /// Also generate gradients (`grad`) and ILC derivatives (`derive`, applied with `<+>`).
    pub derivatives: bool,
}

impl Gen {
    fn name(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    /// A type for an intermediate value, simple more often than not.
    fn ty(&mut self, depth: u32) -> Ty {
        let simple = [Ty::Int, Ty::Int, Ty::Real, Ty::Bool];
        if depth == 0 || self.rng.chance(55) {
            return simple[self.rng.below(4) as usize].clone();
        }
        match self.rng.below(15) {
            12 => kbag(tuple_key(self.rng.below(3))),
            13 | 14 => {
                let k = if self.rng.chance(30) { Ty::Int } else { tuple_key(self.rng.below(3)) };
                let v = [Ty::Real, pair(Ty::Int, Ty::Real), kbag(pair(Ty::Int, Ty::Int))][self.rng.below(3) as usize]
                    .clone();
                kmap(k, v)
            }
            0 => pair(self.ty(depth - 1), self.ty(depth - 1)),
            1 => arr(Ty::Int),
            2 => arr(Ty::Real),
            3 => Ty::Bag,
            4 => Ty::Map,
            5 => fun(Ty::Int, Ty::Int),
            6 => fun(Ty::Real, Ty::Real),
            7 => Ty::MapBag,
            8 => fun(arr(Ty::Real), arr(Ty::Real)),
            9 => fun(Ty::Bag, Ty::Int),
            10 => fun(Ty::Int, fun(Ty::Int, Ty::Int)),
            _ => arr(self.ty(depth - 1)),
        }
    }

    fn int_lit(&mut self) -> String {
        let n = self.rng.range(-3, 12);
        if n < 0 {
            format!("({n})")
        } else {
            n.to_string()
        }
    }

    fn real_lit(&mut self) -> String {
        let n = self.rng.range(-8, 16) as f64 / 4.0;
        if n < 0.0 {
            format!("({n:?})")
        } else {
            format!("{n:?}")
        }
    }

    fn var_of(&mut self, t: &Ty) -> Option<String> {
        let vs: Vec<String> = self.env.iter().filter(|(_, u)| u == t).map(|(n, _)| n.clone()).collect();
        if vs.is_empty() {
            None
        } else {
            Some(vs[self.rng.below(vs.len() as u64) as usize].clone())
        }
    }

    /// A small expression of type `t` (a variable or a literal).
    fn leaf(&mut self, t: &Ty) -> String {
        if self.rng.chance(60) {
            if let Some(v) = self.var_of(t) {
                return v;
            }
        }
        match t {
            Ty::Int => self.int_lit(),
            Ty::Real => self.real_lit(),
            Ty::Bool => if self.rng.chance(50) { "true" } else { "false" }.to_string(),
            Ty::Pair(a, b) => format!("({}, {})", self.leaf(a), self.leaf(b)),
            Ty::Arr(a) => {
                let n = self.rng.below(5);
                let xs: Vec<String> = (0..n).map(|_| self.leaf(a)).collect();
                if xs.is_empty() {
                    // An empty literal needs its type.
                    let x = self.name("e");
                    format!("(let {x} : {t} = [] in {x})")
                } else {
                    format!("[{}]", xs.join(", "))
                }
            }
            Ty::Bag => {
                let n = self.rng.below(5);
                let xs: Vec<String> = (0..n)
                    .map(|_| {
                        let x = self.rng.range(-2, 5);
                        let m = self.rng.range(-2, 3);
                        if m == 1 {
                            format!("{x}")
                        } else {
                            format!("{x} # {m}")
                        }
                    })
                    .collect();
                format!("bag{{{}}}", xs.join(", "))
            }
            Ty::MapBag => {
                let n = self.rng.below(3);
                let xs: Vec<String> = (0..n)
                    .map(|i| {
                        let b = self.leaf(&Ty::Bag);
                        format!("{} -> {b}", i as i64 * 3 - 2)
                    })
                    .collect();
                format!("map{{{}}}", xs.join(", "))
            }
            Ty::Map => {
                let n = self.rng.below(4);
                let dup = self.rng.chance(5);
                let xs: Vec<String> = (0..n)
                    .map(|i| {
                        let k = if dup { 1 } else { i as i64 * 2 - 1 };
                        format!("{k} -> {}", self.rng.range(-3, 5))
                    })
                    .collect();
                format!("map{{{}}}", xs.join(", "))
            }
            Ty::KBag(k) => {
                let n = self.rng.below(4);
                let xs: Vec<String> = (0..n)
                    .map(|_| {
                        let x = self.key_lit(k);
                        let m = self.rng.range(-2, 3);
                        if m == 1 {
                            x
                        } else {
                            format!("{x} # {m}")
                        }
                    })
                    .collect();
                // An empty literal needs its type.
                if xs.is_empty() {
                    let x = self.name("e");
                    format!("(let {x} : {t} = emptyBag in {x})")
                } else {
                    format!("bag{{{}}}", xs.join(", "))
                }
            }
            Ty::KMap(k, v) => {
                let n = self.rng.below(4);
                let mut keys: Vec<String> = (0..n).map(|_| self.key_lit(k)).collect();
                keys.sort();
                keys.dedup();
                if keys.is_empty() {
                    let x = self.name("e");
                    return format!("(let {x} : {t} = emptyMap in {x})");
                }
                let xs: Vec<String> = keys.iter().map(|key| format!("{key} -> {}", self.leaf(v))).collect();
                format!("map{{{}}}", xs.join(", "))
            }
            Ty::Fun(a, b) => {
                let x = self.name("x");
                self.env.push((x.clone(), (**a).clone()));
                let body = self.leaf(b);
                self.env.pop();
                format!("(fun ({x} : {a}) -> {body})")
            }
        }
    }

    /// A literal key of a small range, so keys collide often.
    fn key_lit(&mut self, k: &Ty) -> String {
        match k {
            Ty::Int => match self.rng.range(-1, 3) {
                n if n < 0 => format!("({n})"),
                n => n.to_string(),
            },
            Ty::Bool => if self.rng.chance(50) { "true" } else { "false" }.to_string(),
            Ty::Pair(a, b) => format!("({}, {})", self.key_lit(a), self.key_lit(b)),
            _ => unreachable!("keys are Int, Bool and tuples of them"),
        }
    }

    /// An expression of key type `k` (Int, Bool and tuples of them).
    fn key_expr(&mut self, k: &Ty, d: u32) -> String {
        match k {
            Ty::Pair(a, b) => format!("({}, {})", self.key_expr(a, d), self.key_expr(b, d)),
            _ if self.rng.chance(50) => self.key_lit(k),
            _ => self.expr(k, d),
        }
    }

    /// A pattern destructuring a key of type `k` into fresh variables, which are pushed on the
    /// environment (the caller truncates it).
    fn key_pattern(&mut self, k: &Ty) -> String {
        match k {
            Ty::Pair(a, b) => format!("({}, {})", self.key_pattern(a), self.key_pattern(b)),
            _ => {
                let x = self.name("k");
                self.env.push((x.clone(), k.clone()));
                x
            }
        }
    }

    /// `fun (p : k) -> let PATTERN = p in BODY` with `BODY : r` over the key's components.
    fn key_fun(&mut self, k: &Ty, extra: Option<(&str, &Ty)>, r: &Ty, d: u32) -> String {
        let mark = self.env.len();
        let p = self.name("p");
        let pat = self.key_pattern(k);
        let extra = extra.map(|(w, v)| {
            self.env.push((w.to_string(), v.clone()));
            format!(" ({w} : {v})")
        });
        let body = self.expr(r, d);
        self.env.truncate(mark);
        format!("(fun ({p} : {k}){} -> let {pat} = {p} in {body})", extra.unwrap_or_default())
    }

    /// A collection and a change of it that cancels some or all of its entries exactly (values
    /// and multiplicities reaching the group's zero must disappear in both engines):
    /// `c <+> gchange g (c' <-> c)`, `c <+> gchange g (negate c …)`, and literal changes that
    /// subtract exactly what a literal holds.
    fn cancelling(&mut self, t: &Ty, d: u32) -> String {
        let (lit_entries, neg_entries, g): (Vec<String>, Vec<String>, String) = match t {
            Ty::Bag | Ty::KBag(_) => {
                let k = if let Ty::KBag(k) = t { (**k).clone() } else { Ty::Int };
                let n = 1 + self.rng.below(3);
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for _ in 0..n {
                    let key = self.key_lit(&k);
                    let m = self.rng.range(1, 3);
                    a.push(format!("{key} # {m}"));
                    // Cancel exactly, or leave a remainder.
                    let r = if self.rng.chance(70) { m } else { m - 1 };
                    b.push(format!("{key} # {}", -r));
                }
                (a, b, "bagGroup".into())
            }
            Ty::Map | Ty::MapBag | Ty::KMap(..) => {
                let (k, v) = match t {
                    Ty::Map => (Ty::Int, Ty::Int),
                    Ty::MapBag => (Ty::Int, Ty::Bag),
                    Ty::KMap(k, v) => ((**k).clone(), (**v).clone()),
                    _ => unreachable!(),
                };
                let n = 1 + self.rng.below(3);
                let mut keys: Vec<String> = (0..n).map(|_| self.key_lit(&k)).collect();
                keys.sort();
                keys.dedup();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for key in keys {
                    let exact = self.rng.chance(70);
                    let (x, y) = match &v {
                        Ty::Int => {
                            let x = self.rng.range(1, 4);
                            (x.to_string(), format!("{}", if exact { -x } else { 1 - x }))
                        }
                        Ty::Real => {
                            let x = self.rng.range(1, 8) as f64 / 4.0;
                            (format!("{x:?}"), format!("({:?})", if exact { -x } else { 0.5 - x }))
                        }
                        Ty::Pair(..) => {
                            let (i, x) = (self.rng.range(1, 4), self.rng.range(1, 8) as f64 / 4.0);
                            let j = if exact { -i } else { 0 };
                            (format!("({i}, {x:?})"), format!("({j}, ({:?}))", -x))
                        }
                        Ty::Bag | Ty::KBag(_) => {
                            let ek = if let Ty::KBag(ek) = &v { (**ek).clone() } else { Ty::Int };
                            let e = self.key_lit(&ek);
                            let m = self.rng.range(1, 3);
                            let r = if exact { m } else { m + 1 };
                            (format!("bag{{{e} # {m}}}"), format!("bag{{{e} # {}}}", -r))
                        }
                        _ => unreachable!(),
                    };
                    a.push(format!("{key} -> {x}"));
                    b.push(format!("{key} -> {y}"));
                }
                let g = match &v {
                    Ty::Int => "(mapGroup intGroup)".to_string(),
                    Ty::Bag => "(mapGroup bagGroup)".to_string(),
                    other => format!("(mapGroup {})", value_group(other)),
                };
                (a, b, g)
            }
            _ => unreachable!("only collections cancel"),
        };
        let (open, close) = if matches!(t, Ty::Bag | Ty::KBag(_)) { ("bag{", "}") } else { ("map{", "}") };
        let base = format!("{open}{}{close}", lit_entries.join(", "));
        let change = format!("{open}{}{close}", neg_entries.join(", "));
        match self.rng.below(4) {
            // A literal change subtracting what the literal holds.
            0 | 1 => format!("({base} <+> gchange {g} {change})"),
            // The difference to another collection, added back: `c <+> (c' <-> c)` is `c'`.
            2 => {
                let other = self.expr(t, d);
                format!("(let cb = {base} in cb <+> ({other} <-> cb))")
            }
            // A collection computed elsewhere, cancelled against itself and a literal.
            _ => {
                let e = self.expr(t, d);
                format!("(let cx = {e} in (cx <+> gchange {g} {change}) <+> ({base} <-> cx))")
            }
        }
    }

    /// An expression of type `t` within the depth budget.
    /// A gradient or an ILC derivative of type `t`, where there is one: `grad` of a `Real` or an
    /// `Array Real` function (summed), and `f x <+> derive f x dx` for a closed `f` on `Int` or
    /// `Bag Int` (a change applied: the result is `f (x <+> dx)`).
    fn derivative(&mut self, t: &Ty, d: u32) -> Option<String> {
        match t {
            Ty::Real => {
                let array = self.rng.chance(40);
                let (x, xt) = (self.name("g"), if array { arr(Ty::Real) } else { Ty::Real });
                self.env.push((x.clone(), xt.clone()));
                let body = self.expr(&Ty::Real, d);
                self.env.pop();
                let at = self.expr(&xt, d);
                let g = format!("(grad (fun ({x} : {xt}) -> {body}) {at})");
                Some(if array { format!("(sum {g})") } else { g })
            }
            Ty::Int | Ty::Bag => {
                // `derive` takes a closed term: the body sees only its parameter.
                let saved = std::mem::take(&mut self.env);
                let n = self.name("n");
                self.env.push((n.clone(), t.clone()));
                let body = self.expr(t, d);
                self.env = saved;
                let f = format!("(fun ({n} : {t}) -> {body})");
                let x = self.expr(t, d);
                let dx = match (t, self.rng.below(3)) {
                    (Ty::Int, 0) => format!("(replace {})", self.int_lit()),
                    (Ty::Int, _) => format!("(gchange intGroup {})", self.int_lit()),
                    (_, 0) => format!("(replace {})", self.leaf(&Ty::Bag)),
                    _ => format!("(gchange bagGroup {})", self.leaf(&Ty::Bag)),
                };
                let v = self.name("dv");
                Some(format!("(let {v} = {x} in {f} {v} <+> (derive {f}) {v} {dx})"))
            }
            _ => None,
        }
    }

    fn expr(&mut self, t: &Ty, depth: u32) -> String {
        if depth == 0 || self.rng.chance(15) {
            return self.leaf(t);
        }
        let d = depth - 1;
        if self.derivatives && self.rng.chance(8) {
            if let Some(e) = self.derivative(t, d) {
                return e;
            }
        }
        // Forms for every type.
        match self.rng.below(14) {
            0 => {
                let u = self.ty(2);
                let x = self.name("v");
                let rhs = self.expr(&u, d);
                self.env.push((x.clone(), u));
                let body = self.expr(t, d);
                self.env.pop();
                return format!("(let {x} = {rhs} in {body})");
            }
            1 => {
                let c = self.expr(&Ty::Bool, d);
                return format!("(if {c} then {} else {})", self.expr(t, d), self.expr(t, d));
            }
            2 => {
                let u = self.ty(1);
                let f = self.expr(&fun(u.clone(), t.clone()), d);
                return format!("({f} {})", self.expr(&u, d));
            }
            3 => {
                let u = self.ty(1);
                return format!("({}.1)", self.expr(&pair(t.clone(), u), d));
            }
            4 if matches!(t, Ty::Int | Ty::Real | Ty::Bool | Ty::Fun(..)) => {
                let xs = self.expr(&arr(t.clone()), d);
                let i = if self.rng.chance(80) { self.rng.range(0, 2).to_string() } else { self.expr(&Ty::Int, d) };
                return format!("({xs}.[{i}])");
            }
            5 => {
                // fold with a two-argument λ.
                let e = self.ty(1);
                let (acc, x) = (self.name("acc"), self.name("x"));
                self.env.push((acc.clone(), t.clone()));
                self.env.push((x.clone(), e.clone()));
                let body = self.expr(t, d);
                self.env.truncate(self.env.len() - 2);
                let z = self.expr(t, d);
                let xs = self.expr(&arr(e.clone()), d);
                return format!("(fold (fun ({acc} : {t}) ({x} : {e}) -> {body}) {z} {xs})");
            }
            6 => {
                let n = if self.rng.chance(90) { self.rng.range(0, 4).to_string() } else { self.int_lit() };
                let f = self.expr(&fun(t.clone(), t.clone()), d);
                if self.rng.chance(30) {
                    // `while` counting to n (a negative n: no iteration).
                    let p = self.name("p");
                    return format!(
                        "((while (fun ({p} : Int * ({t})) -> {p}.1 < {n}) (fun ({p} : Int * ({t})) -> ({p}.1 + 1, {f} {p}.2)) (0, {})).2)",
                        self.expr(t, d)
                    );
                }
                return format!("(iterate {n} {f} {})", self.expr(t, d));
            }
            _ => {}
        }
        match t {
            Ty::Int => match self.rng.below(17) {
                13 => {
                    let k = tuple_key(self.rng.below(3));
                    let f = self.key_fun(&k, None, &Ty::Int, d);
                    format!("(foldBag intGroup {f} {})", self.expr(&kbag(k), d))
                }
                14 => {
                    let k = if self.rng.chance(30) { Ty::Int } else { tuple_key(self.rng.below(3)) };
                    let v = [Ty::Real, pair(Ty::Int, Ty::Real), kbag(pair(Ty::Int, Ty::Int))]
                        [self.rng.below(3) as usize]
                        .clone();
                    let w = self.name("w");
                    let f = self.key_fun(&k, Some((&w, &v)), &Ty::Int, d);
                    format!("(foldMap {} intGroup {f} {})", value_group(&v), self.expr(&kmap(k, v), d))
                }
                15 => {
                    // The total multiplicity of a bag of tuple keys.
                    let k = tuple_key(self.rng.below(3));
                    let b = self.expr(&kbag(k.clone()), d);
                    format!("(foldBag intGroup (fun (q : {k}) -> 1) {b})")
                }
                0..=2 => {
                    let op = ["+", "-", "*", "/", "%"][self.rng.below(5) as usize];
                    format!("({} {op} {})", self.expr(t, d), self.expr(t, d))
                }
                3 => {
                    let u = arr(self.rng_ty_small());
                    format!("(len {})", self.expr(&u, d))
                }
                4 => format!("(sum {})", self.expr(&arr(Ty::Int), d)),
                5 => {
                    let x = self.name("x");
                    self.env.push((x.clone(), Ty::Int));
                    let body = self.expr(t, d);
                    self.env.pop();
                    let g = self.int_group(d);
                    format!("(foldBag {g} (fun ({x} : Int) -> {body}) {})", self.expr(&Ty::Bag, d))
                }
                6 => {
                    let f = ["abs", "neg"][self.rng.below(2) as usize];
                    format!("({f} {})", self.expr(t, d))
                }
                7 => {
                    let f = ["max", "min"][self.rng.below(2) as usize];
                    format!("({f} {} {})", self.expr(t, d), self.expr(t, d))
                }
                8 => format!("(lookup intGroup {} {})", self.expr(t, d), self.expr(&Ty::Map, d)),
                // NaN and out-of-range values are errors both engines must report alike.
                16 => format!("(toInt {})", self.expr(&Ty::Real, d)),
                9 => {
                    let (k, v) = (self.name("k"), self.name("w"));
                    self.env.push((k.clone(), Ty::Int));
                    self.env.push((v.clone(), Ty::Int));
                    let body = self.expr(t, d);
                    self.env.truncate(self.env.len() - 2);
                    format!(
                        "(foldMap intGroup intGroup (fun ({k} : Int) ({v} : Int) -> {body}) {})",
                        self.expr(&Ty::Map, d)
                    )
                }
                10 => format!("({} <+> {})", self.expr(t, d), self.change(t, d)),
                11 => {
                    let (k, v, a, y) = (self.name("k"), self.name("w"), self.name("a"), self.name("y"));
                    self.env.push((k.clone(), Ty::Int));
                    self.env.push((v.clone(), Ty::Bag));
                    let body = self.expr(t, d);
                    self.env.truncate(self.env.len() - 2);
                    let m = self.expr(&Ty::MapBag, d);
                    let z = self.expr(t, d);
                    format!(
                        "(foldMapGen {z} (fun ({a} : Int) ({y} : Int) -> {a} * 2 + {y}) (fun ({k} : Int) ({v} : (Bag Int)) -> {body}) {m})"
                    )
                }
                _ => format!("(dot {} {})", self.expr(&arr(Ty::Int), d), self.expr(&arr(Ty::Int), d)),
            },
            Ty::Real => match self.rng.below(11) {
                9 => {
                    let k = if self.rng.chance(30) { Ty::Int } else { tuple_key(self.rng.below(3)) };
                    let key = self.key_expr(&k, d);
                    if self.rng.chance(50) {
                        format!("(lookup realGroup {key} {})", self.expr(&kmap(k, Ty::Real), d))
                    } else {
                        let v = pair(Ty::Int, Ty::Real);
                        format!("((lookup {} {key} {}).2)", value_group(&v), self.expr(&kmap(k, v), d))
                    }
                }
                10 => {
                    let k = if self.rng.chance(30) { Ty::Int } else { tuple_key(self.rng.below(3)) };
                    let w = self.name("w");
                    let f = self.key_fun(&k, Some((&w, &Ty::Real)), &Ty::Real, d);
                    format!("(foldMap realGroup realGroup {f} {})", self.expr(&kmap(k, Ty::Real), d))
                }
                0..=2 => {
                    let op = ["+", "-", "*", "/"][self.rng.below(4) as usize];
                    format!("({} {op} {})", self.expr(t, d), self.expr(t, d))
                }
                3 => format!("(toReal {})", self.expr(&Ty::Int, d)),
                4 => {
                    let f = ["sin", "cos", "exp", "sqrt", "tanh", "sigmoid", "abs", "log", "floor", "round"]
                        [self.rng.below(10) as usize];
                    format!("({f} {})", self.expr(t, d))
                }
                5 => format!("({} ^ {})", self.expr(t, d), self.expr(t, d)),
                6 => format!("(sum {})", self.expr(&arr(Ty::Real), d)),
                7 => format!("(dot {} {})", self.expr(&arr(Ty::Real), d), self.expr(&arr(Ty::Real), d)),
                _ => format!("({} <+> {})", self.expr(t, d), self.change(t, d)),
            },
            Ty::Bool => match self.rng.below(6) {
                0 => {
                    let u = [Ty::Int, Ty::Real][self.rng.below(2) as usize].clone();
                    let op = ["<", "<=", ">", ">=", "==", "!="][self.rng.below(6) as usize];
                    format!("({} {op} {})", self.expr(&u, d), self.expr(&u, d))
                }
                1 => {
                    let u = pair(Ty::Int, Ty::Bool);
                    format!("({} == {})", self.expr(&u, d), self.expr(&u, d))
                }
                2 => {
                    let op = ["&&", "||"][self.rng.below(2) as usize];
                    format!("({} {op} {})", self.expr(t, d), self.expr(t, d))
                }
                3 => format!("(not {})", self.expr(t, d)),
                4 if self.rng.chance(50) => {
                    let u = [Ty::Bag, Ty::Map][self.rng.below(2) as usize].clone();
                    let op = ["==", "!="][self.rng.below(2) as usize];
                    format!("({} {op} {})", self.expr(&u, d), self.expr(&u, d))
                }
                _ => self.leaf(t),
            },
            Ty::Pair(a, b) => match self.rng.below(4) {
                0 if matches!((&**a, &**b), (Ty::Int, Ty::Real)) => {
                    let (p, q) = (self.expr(t, d), self.expr(t, d));
                    format!("({p} <+> ({q} <-> {p}))")
                }
                1 if matches!((&**a, &**b), (Ty::Int, Ty::Real)) => {
                    let x = self.name("x");
                    self.env.push((x.clone(), Ty::Int));
                    let body = self.expr(t, d);
                    self.env.pop();
                    let g = if self.rng.chance(50) {
                        format!("(pairGroup {} realGroup)", self.int_group(d))
                    } else {
                        "(group (fun (p : Int * Real) (q : Int * Real) -> (p.1 + q.1, p.2 * q.2)) (fun (p : Int * Real) -> (0 - p.1, 1.0 / p.2)) (0, 1.0))".to_string()
                    };
                    format!("(foldBag {g} (fun ({x} : Int) -> {body}) {})", self.expr(&Ty::Bag, d))
                }
                _ => format!("({}, {})", self.expr(a, d), self.expr(b, d)),
            },
            Ty::Arr(a) => match self.rng.below(4) {
                0 => {
                    let n = if self.rng.chance(90) { self.rng.range(0, 5).to_string() } else { self.int_lit() };
                    let i = self.name("i");
                    self.env.push((i.clone(), Ty::Int));
                    let body = self.expr(a, d);
                    self.env.pop();
                    format!("(build {n} (fun ({i} : Int) -> {body}))")
                }
                1 => {
                    let u = self.rng_ty_small();
                    let f = self.expr(&fun(u.clone(), (**a).clone()), d);
                    format!("(map {f} {})", self.expr(&arr(u), d))
                }
                2 => {
                    let (x, y) = (self.name("x"), self.name("y"));
                    let (u, w) = (self.rng_ty_small(), self.rng_ty_small());
                    self.env.push((x.clone(), u.clone()));
                    self.env.push((y.clone(), w.clone()));
                    let body = self.expr(a, d);
                    self.env.truncate(self.env.len() - 2);
                    let xs = self.expr(&arr(u.clone()), d);
                    let ys = self.expr(&arr(w.clone()), d);
                    format!("(zipWith (fun ({x} : {u}) ({y} : {w}) -> {body}) {xs} {ys})")
                }
                _ => self.leaf(t),
            },
            Ty::Bag => match self.rng.below(9) {
                8 => self.cancelling(t, d),
                0 => format!("(merge {} {})", self.expr(t, d), self.expr(t, d)),
                1 => format!("(negate {})", self.expr(t, d)),
                2 => format!("(mapBag {} {})", self.expr(&fun(Ty::Int, Ty::Int), d), self.expr(t, d)),
                3 => {
                    let x = self.name("x");
                    self.env.push((x.clone(), Ty::Int));
                    let c = self.expr(&Ty::Bool, d);
                    self.env.pop();
                    format!("(filterBag (fun ({x} : Int) -> {c}) {})", self.expr(t, d))
                }
                4 => format!("(singleton {})", self.expr(&Ty::Int, d)),
                5 => {
                    let x = self.name("x");
                    self.env.push((x.clone(), Ty::Int));
                    let b = self.expr(t, d);
                    self.env.pop();
                    format!("(flatMapBag (fun ({x} : Int) -> {b}) {})", self.expr(t, d))
                }
                6 => format!("({} <+> {})", self.expr(t, d), self.change(t, d)),
                _ => self.leaf(t),
            },
            Ty::MapBag => match self.rng.below(6) {
                5 => self.cancelling(t, d),
                0 => {
                    let x = self.name("x");
                    self.env.push((x.clone(), Ty::Int));
                    let k = self.expr(&Ty::Int, d);
                    let b = self.expr(&Ty::Bag, d);
                    self.env.pop();
                    format!(
                        "(foldBag (mapGroup bagGroup) (fun ({x} : Int) -> singletonMap {k} {b}) {})",
                        self.expr(&Ty::Bag, d)
                    )
                }
                1 => format!("({} <+> gchange (mapGroup bagGroup) {})", self.expr(t, d), self.expr(t, d)),
                2 => format!("({} <+> ({} <-> {}))", self.expr(t, d), self.expr(t, d), self.expr(t, d)),
                3 => {
                    let (k, v) = (self.name("k"), self.name("w"));
                    self.env.push((k.clone(), Ty::Int));
                    self.env.push((v.clone(), Ty::Int));
                    let b = self.expr(&Ty::Bag, d);
                    let key = self.expr(&Ty::Int, d);
                    self.env.truncate(self.env.len() - 2);
                    format!(
                        "(foldMap intGroup (mapGroup bagGroup) (fun ({k} : Int) ({v} : Int) -> singletonMap {key} {b}) {})",
                        self.expr(&Ty::Map, d)
                    )
                }
                _ => self.leaf(t),
            },
            Ty::Map => match self.rng.below(7) {
                6 => self.cancelling(t, d),
                0 => format!("(singletonMap {} {})", self.expr(&Ty::Int, d), self.expr(&Ty::Int, d)),
                1 => {
                    let x = self.name("x");
                    self.env.push((x.clone(), Ty::Int));
                    let k = self.expr(&Ty::Int, d);
                    let v = self.expr(&Ty::Int, d);
                    self.env.pop();
                    let g = self.int_group(d);
                    format!(
                        "(foldBag (mapGroup {g}) (fun ({x} : Int) -> singletonMap {k} {v}) {})",
                        self.expr(&Ty::Bag, d)
                    )
                }
                2 => format!("({} <+> gchange (mapGroup intGroup) {})", self.expr(t, d), self.expr(t, d)),
                3 => format!("({} <+> {})", self.expr(t, d), self.change(t, d)),
                _ => self.leaf(t),
            },
            Ty::KBag(k) => match self.rng.below(9) {
                0 => format!("(merge {} {})", self.expr(t, d), self.expr(t, d)),
                1 => format!("(negate {})", self.expr(t, d)),
                2 => format!("(singleton {})", self.key_expr(k, d)),
                3 => format!("({} <+> {})", self.expr(t, d), self.change(t, d)),
                4 | 5 => self.cancelling(t, d),
                6 => {
                    let x = self.name("x");
                    self.env.push((x.clone(), Ty::Int));
                    let key = self.key_expr(k, d);
                    self.env.pop();
                    format!("(mapBag (fun ({x} : Int) -> {key}) {})", self.expr(&Ty::Bag, d))
                }
                7 => {
                    let f = self.key_fun(k, None, &Ty::Bool, d);
                    format!("(filterBag {f} {})", self.expr(t, d))
                }
                _ => self.leaf(t),
            },
            Ty::KMap(k, v) => match self.rng.below(7) {
                0 => format!("(singletonMap {} {})", self.key_expr(k, d), self.expr(v, d)),
                1 => {
                    let x = self.name("x");
                    self.env.push((x.clone(), Ty::Int));
                    let key = self.key_expr(k, d);
                    let val = self.expr(v, d);
                    self.env.pop();
                    format!(
                        "(foldBag (mapGroup {}) (fun ({x} : Int) -> singletonMap {key} {val}) {})",
                        value_group(v),
                        self.expr(&Ty::Bag, d)
                    )
                }
                2 => format!("({} <+> {})", self.expr(t, d), self.change(t, d)),
                3 | 4 => self.cancelling(t, d),
                5 => {
                    // Re-keyed through foldMap: the value kept, the key rebuilt from its parts.
                    let w = self.name("w");
                    let mark = self.env.len();
                    let p = self.name("p");
                    let pat = self.key_pattern(k);
                    let key = self.key_expr(k, d);
                    self.env.truncate(mark);
                    let g = value_group(v);
                    format!(
                        "(foldMap {g} (mapGroup {g}) (fun ({p} : {k}) ({w} : {v}) -> let {pat} = {p} in singletonMap {key} {w}) {})",
                        self.expr(t, d)
                    )
                }
                _ => self.leaf(t),
            },
            Ty::Fun(a, b) if self.rng.chance(30) => match (&**a, &**b) {
                // Builtins partially applied, as values.
                (Ty::Arr(x), Ty::Arr(y)) if x == y => match self.rng.below(3) {
                    0 => format!("(map {})", self.expr(&fun((**x).clone(), (**y).clone()), d)),
                    1 => {
                        let (p, q) = (self.name("p"), self.name("q"));
                        self.env.push((p.clone(), (**x).clone()));
                        self.env.push((q.clone(), (**x).clone()));
                        let body = self.expr(y, d);
                        self.env.truncate(self.env.len() - 2);
                        format!("(zipWith (fun ({p} : {x}) ({q} : {x}) -> {body}) {})", self.expr(a, d))
                    }
                    _ => format!(
                        "(iterate {} (map {}))",
                        self.rng.range(0, 3),
                        self.expr(&fun((**x).clone(), (**x).clone()), d)
                    ),
                },
                (Ty::Bag, Ty::Int) => {
                    let x = self.name("x");
                    self.env.push((x.clone(), Ty::Int));
                    let body = self.expr(&Ty::Int, d);
                    self.env.pop();
                    format!("(foldBag {} (fun ({x} : Int) -> {body}))", self.int_group(d))
                }
                (Ty::Int, Ty::Fun(c, r)) if **c == Ty::Int && **r == Ty::Int => {
                    ["max", "min", "(fun (p : Int) (q : Int) -> p * 2 - q)"][self.rng.below(3) as usize].to_string()
                }
                _ if a == b => {
                    let n = self.rng.range(0, 3);
                    format!("(iterate {n} {})", self.expr(&fun((**a).clone(), (**a).clone()), d))
                }
                _ => self.leaf(t),
            },
            Ty::Fun(a, b) => match self.rng.below(6) {
                0 | 1 => {
                    let x = self.name("x");
                    self.env.push((x.clone(), (**a).clone()));
                    let body = self.expr(b, d);
                    self.env.pop();
                    format!("(fun ({x} : {a}) -> {body})")
                }
                2 if **a == Ty::Int && **b == Ty::Int => {
                    let f = ["max", "min", "(fun (p : Int) (q : Int) -> p - q)"][self.rng.below(3) as usize];
                    format!("({f} {})", self.expr(a, d))
                }
                3 => {
                    // Composition through a closure that captures two closures.
                    let (f, g) = (self.expr(t, d), self.expr(&fun((**b).clone(), (**b).clone()), d));
                    let x = self.name("x");
                    format!("(let cf = {f} in let cg = {g} in fun ({x} : {a}) -> cg (cf {x}))")
                }
                4 => {
                    // A curried function applied to one argument.
                    let u = self.rng_ty_small();
                    let (y, x) = (self.name("y"), self.name("x"));
                    self.env.push((y.clone(), u.clone()));
                    self.env.push((x.clone(), (**a).clone()));
                    let body = self.expr(b, d);
                    self.env.truncate(self.env.len() - 2);
                    format!("((fun ({y} : {u}) ({x} : {a}) -> {body}) {})", self.expr(&u, d))
                }
                _ => self.leaf(t),
            },
        }
    }

    /// A simple element type.
    fn rng_ty_small(&mut self) -> Ty {
        [Ty::Int, Ty::Real, Ty::Bool][self.rng.below(3) as usize].clone()
    }

    /// `intGroup` or a user group on Int.
    fn int_group(&mut self, d: u32) -> String {
        match self.rng.below(3) {
            0 => "(group (fun (a : Int) (b : Int) -> a + b) (fun (a : Int) -> 0 - a) 0)".to_string(),
            1 if d > 0 => {
                let m = self.rng.range(0, 3);
                format!("(group (fun (a : Int) (b : Int) -> (a + b) / {m}) (fun (a : Int) -> a) 0)")
            }
            _ => "intGroup".to_string(),
        }
    }

    /// A change of base type `t`.
    fn change(&mut self, t: &Ty, d: u32) -> String {
        let v = self.expr(t, d);
        match (self.rng.below(3), t) {
            (0, _) => format!("(replace {v})"),
            (1, Ty::Int) => format!("(gchange {} {v})", self.int_group(d)),
            (1, Ty::Real) => format!("(gchange realGroup {v})"),
            (1, Ty::Bag) => format!("(gchange bagGroup {v})"),
            (1, Ty::Map) => format!("(gchange (mapGroup intGroup) {v})"),
            (1, Ty::KBag(_)) => format!("(gchange bagGroup {v})"),
            (1, Ty::KMap(_, w)) => format!("(gchange (mapGroup {}) {v})", value_group(w)),
            _ => format!("({v} <-> {})", self.expr(t, d)),
        }
    }

    /// `e : t` applied to generated arguments until its value is not a function (so a
    /// function-valued result is compared by what it computes, not printed as `<fun>`).
    fn saturate(&mut self, mut e: String, mut t: Ty, d: u32) -> String {
        while let Ty::Fun(a, b) = t {
            let arg = self.expr(&a, d);
            e = format!("({e} {arg})");
            t = *b;
        }
        e
    }

    /// A whole program: a few definitions, then `main`, which uses every definition (a helper
    /// `main` does not call would be compiled and never run).
    pub fn program(&mut self) -> String {
        let mut src = String::new();
        let mut helpers = Vec::new();
        for _ in 0..self.rng.below(4) {
            let name = self.name("d");
            if self.rng.chance(60) {
                let (a, b) = (self.ty(1), self.ty(1));
                let x = self.name("p");
                self.env.push((x.clone(), a.clone()));
                let body = self.expr(&b, 3);
                self.env.pop();
                let _ = writeln!(src, "def {name} ({x} : {a}) = {body}");
                helpers.push((name.clone(), fun(a.clone(), b.clone())));
                self.env.push((name, fun(a, b)));
            } else {
                let t = self.ty(1);
                let body = self.expr(&t, 3);
                let _ = writeln!(src, "def {name} = {body}");
                helpers.push((name.clone(), t.clone()));
                self.env.push((name, t));
            }
        }
        let t = self.ty(2);
        let body = self.expr(&t, 4);
        let mut parts = vec![self.saturate(body, t, 2)];
        // Each helper, called (saturated) where `main` evaluates it: helpers are pure, so
        // evaluating one more use changes no other result.
        for (name, t) in helpers {
            let used = self.saturate(name, t, 1);
            parts.push(used);
        }
        let main = if parts.len() == 1 { parts.pop().unwrap_or_default() } else { format!("({})", parts.join(", ")) };
        let _ = writeln!(src, "def main = {main}");
        src
    }
}

/// What an engine printed: the value, or the error's message and span.
pub type Outcome = Result<String, (String, u32, u32)>;

/// `main` of `mono` compiled exactly as lowering made it (`anf::opt` off).
fn unoptimised(mono: &anf::mono::MonoProgram) -> Result<runtime::value::Value, frontend::Diagnostic> {
    use runtime::engine::{root_span, Machine, BIG_STACK_BUDGET};
    // As the engine does: compiled reverse mode, then ILC's `expand` (`run_in` has refused a
    // program neither compiles before this is called).
    let transformed = adjoint::reverse::transform(mono)
        .map_err(|nc| frontend::Diagnostic::error(nc.span, format!("{} is not compiled", nc.what)))?;
    let mono = transformed.as_ref().unwrap_or(mono);
    let expanded = adjoint::incremental::expand(mono)?;
    let mono = &expanded;
    let span = root_span(mono);
    let lowered = anf::lower::lower(mono, &anf::lower::LowerOptions::default())
        .map_err(|e| frontend::Diagnostic::error(span, format!("lowering: {}", e.message)))?;
    let machine = Machine::new_with(&lowered, span, BIG_STACK_BUDGET, &anf::opt::OptOptions::none())
        .map_err(|e| frontend::Diagnostic::error(span, e))?;
    machine.run_main(&mut runtime::native::CallCtx::new(runtime::native::DEFAULT_ARENA_LIMIT))
}

/// Runs each named program under [`both_engines`] and fails, listing every disagreement, unless
/// the interpreter, the optimised and the unoptimised compiled code give the same outcome.
pub fn assert_engines_agree<'a>(programs: impl IntoIterator<Item = (&'a str, String)>) {
    let mut failures = Vec::new();
    for (name, src) in programs {
        match both_engines(&src) {
            Err(e) => failures.push(format!("{name}: {e}")),
            Ok((a, b, c)) if a != b || a != c => {
                failures.push(format!("{name}: interpreter {a:?}\n  compiled {b:?}\n  unoptimised {c:?}"))
            }
            Ok(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The interpreter's outcome, and the compiled engine's with `anf::opt` on (as `nabla run` runs
/// it) and off: when only the optimised one disagrees, the optimiser is at fault; when both do,
/// lowering, the JIT or the native runtime.
pub fn both_engines(src: &str) -> Result<(Outcome, Outcome, Outcome), String> {
    let src = src.to_string();
    frontend::with_big_stack(move || {
        let (_, mono) = runtime::prepare(&src, "main").map_err(|d| format!("does not type-check: {}", d.message))?;
        let show = |r: Result<runtime::value::Value, frontend::Diagnostic>| -> Outcome {
            r.map(|v| v.to_string()).map_err(|d| (d.message, d.span.lo, d.span.hi))
        };
        // A program the engine hands to the interpreter is not compared (its errors would be the
        // interpreter's in both columns).
        if let Some(what) = runtime::engine::uncompiled_site(&mono) {
            return Err(format!("not compiled: {what}"));
        }
        let interp = show(runtime::interp::run(&mono));
        let compiled = match runtime::engine::run(&mono) {
            Ok(r) if r.note.is_some() => return Err(format!("not compiled: {}", r.note.unwrap_or_default())),
            r => show(r.map(|r| r.value)),
        };
        // Again with loops compacting after every iteration that allocates (normally only after
        // many megabytes), in checking mode (released memory poisoned, released bags and maps
        // emptied, nothing reused): the result must not change.
        let mut ctx = runtime::native::CallCtx::new(runtime::native::DEFAULT_ARENA_LIMIT);
        ctx.set_compact_min(0);
        ctx.set_checking(true);
        let compacting = show(runtime::engine::run_in(&mono, &mut ctx).map(|r| r.value));
        if compacting != compiled {
            return Err(format!("compacting every iteration changed the result: {compacting:?}"));
        }
        let plain = show(unoptimised(&mono));
        Ok((interp, compiled, plain))
    })
}

/// Do two outcomes agree, Reals to 1e-9 relative (gradients are sums in different orders in the
/// two engines)? Everything but the numbers must be identical.
pub fn outcomes_agree(a: &Outcome, b: &Outcome) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => texts_agree(x, y),
        (Err(x), Err(y)) => x == y,
        _ => false,
    }
}

fn texts_agree(x: &str, y: &str) -> bool {
    if x == y {
        return true;
    }
    let (tx, ty) = (tokens(x), tokens(y));
    tx.len() == ty.len()
        && tx.iter().zip(&ty).all(|(a, b)| match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(p), Ok(q)) if a.contains('.') || b.contains('.') => {
                p == q || (p.is_nan() && q.is_nan()) || (p - q).abs() <= 1e-9 * p.abs().max(q.abs()) + 1e-12
            }
            _ => a == b,
        })
}

/// Numbers (with sign, point and exponent) and single other characters.
fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_ascii_digit() || (c == '-' && cs.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            let start = i;
            i += 1;
            while i < cs.len()
                && (cs[i].is_ascii_alphanumeric()
                    || cs[i] == '.'
                    || ((cs[i] == '-' || cs[i] == '+') && cs[i - 1] == 'e'))
            {
                i += 1;
            }
            out.push(cs[start..i].iter().collect());
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}
