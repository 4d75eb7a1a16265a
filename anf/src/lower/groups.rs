//! Groups, equality and changes.
//!
//! A `Group t` value is a record whose first word is its kind (`GroupKind`):
//! `[0]` intGroup, `[1]` realGroup, `[2]` bagGroup, `[3, g]` mapGroup g, `[4, g, h]` pairGroup g h,
//! `[5, op tag, op env, inverse tag, inverse env, zero words…]` a user's `group op inverse zero`.
//! Group operations are helper functions per carrier type `t` that branch on the kinds a group of
//! that type can have (`intGroup` and user groups at `Int`, and so on), mirroring
//! `runtime::interp::groups` case by case: `zero`, `op`, `op_into` (the in-place variant folds use
//! for their accumulator, which they own), `inverse` and `scale` (a bag entry's multiplicity).
//! Maps drop a key whose value becomes the group's zero, compared with the interpreter's
//! structural equality (`eq` helpers).

use frontend::types::Type;

use super::value::flat;
use super::{mangle, Clo, LVal, LowerError, Lowerer, Site, Work, R};
use crate::ir::{self, BinaryOp, Cmp, FuncId, Signature, UnaryOp, Value};

/// The kinds of group records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroupKind {
    Int = 0,
    Real = 1,
    Bag = 2,
    Map = 3,
    Pair = 4,
    User = 5,
}

/// Byte offsets in a user group's record.
const USER_OP: i32 = 8;
const USER_INVERSE: i32 = 24;
const USER_ZERO: i32 = 40;

/// Helper functions generated per type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Helper {
    /// `(g) -> t`
    Zero,
    /// `(g, site, a, b) -> t`
    Op,
    /// `(g, site, acc, b) -> t`: may update `acc` (a fresh value its caller owns) in place.
    OpInto,
    /// `(g, site, a) -> t`
    Inv,
    /// `(g, site, a, m: i64) -> t`: `a` combined with itself `m` times.
    Scale,
    /// `(a, b) -> bool`: the interpreter's `Value::equals`.
    Eq,
    /// `(a) -> t`: a copy whose bags and maps no one else holds.
    Fresh,
}

impl Helper {
    fn name(self) -> &'static str {
        match self {
            Helper::Zero => "group.zero",
            Helper::Op => "group.op",
            Helper::OpInto => "group.op_into",
            Helper::Inv => "group.inverse",
            Helper::Scale => "group.scale",
            Helper::Eq => "eq",
            Helper::Fresh => "fresh",
        }
    }
    fn takes_group(self) -> bool {
        !matches!(self, Helper::Eq | Helper::Fresh)
    }
    fn takes_site(self) -> bool {
        self.takes_group() && self != Helper::Zero
    }
}

/// The kinds a group of carrier type `t` can have, the user's last.
fn kinds(t: &Type) -> Vec<GroupKind> {
    match t {
        Type::Int => vec![GroupKind::Int, GroupKind::User],
        Type::Real => vec![GroupKind::Real, GroupKind::User],
        Type::Bag(_) => vec![GroupKind::Bag, GroupKind::User],
        Type::Map(..) => vec![GroupKind::Map, GroupKind::User],
        Type::Tuple(ts) if ts.len() == 2 => vec![GroupKind::Pair, GroupKind::User],
        _ => vec![GroupKind::User],
    }
}

/// Does a value of type `t` hold bags or maps (that `op_into` may update in place)?
fn holds_collections(t: &Type) -> bool {
    match t {
        Type::Bag(_) | Type::Map(..) => true,
        Type::Tuple(ts) => ts.iter().any(holds_collections),
        _ => false,
    }
}

/// Does `t` have a canonical group (`b <-> a` is then a group change)? As
/// `runtime::interp::incremental::canonical_group`.
pub(crate) fn has_canonical_group(t: &Type) -> bool {
    match t {
        Type::Int | Type::Real | Type::Bag(_) => true,
        Type::Map(_, v) => has_canonical_group(v),
        Type::Tuple(ts) => ts.len() == 2 && ts.iter().all(has_canonical_group),
        _ => false,
    }
}

fn map_types(t: &Type) -> R<(Type, Type)> {
    match t {
        Type::Map(k, v) => Ok(((**k).clone(), (**v).clone())),
        t => Err(LowerError::internal(format!("expected a map type, found {t}"))),
    }
}

fn pair_types(t: &Type) -> R<(Type, Type)> {
    match t {
        Type::Tuple(ts) if ts.len() == 2 => Ok((ts[0].clone(), ts[1].clone())),
        t => Err(LowerError::internal(format!("expected a pair type, found {t}"))),
    }
}

/// The arguments a group helper got, as values.
struct GroupArgs {
    g: Value,
    site: Site,
    a: Option<LVal>,
    b: Option<LVal>,
    m: Option<Value>,
}

impl Lowerer<'_> {
    /// A new group record of `kind` followed by `words`. Builtin groups without components are
    /// remembered, so operations on them in this function are emitted inline.
    pub(crate) fn group_record(&mut self, kind: GroupKind, words: &[Value]) -> Value {
        let k = self.b().iconst(kind as i64);
        let mut all = vec![k];
        all.extend_from_slice(words);
        let g = self.record(&all);
        if matches!(kind, GroupKind::Int | GroupKind::Real | GroupKind::Bag) {
            self.known_groups.insert((self.cur_func, g), kind);
        }
        if let (GroupKind::Map, [inner]) = (kind, words) {
            if let Some(k) = self.known_group(*inner) {
                self.known_map_inner.insert((self.cur_func, g), k);
            }
        }
        g
    }

    /// `acc ⊕ m·y` (`m` absent: `acc ⊕ y`) in group `g` at carrier `t`, updating `acc` (a fresh
    /// value its caller owns, such as a fold's accumulator, which `y` is not) in place. A
    /// `mapGroup` over one-word values in a builtin group (Int, Real, Bag) is one runtime call,
    /// `nabla_map_add_scaled`, with no scaled copy of `y`; whether `g` is one is known here when
    /// this function made it, else read from its record at run time. Any other group: `scale`,
    /// then `op_into`.
    pub(crate) fn add_scaled_into(
        &mut self,
        t: &Type,
        g: Value,
        site: Site,
        acc: Vec<Value>,
        y: Vec<Value>,
        m: Option<Value>,
    ) -> R<Vec<Value>> {
        let generic = |l: &mut Self| -> R<Vec<Value>> {
            let y = match m {
                Some(m) => {
                    let mut args = y.clone();
                    args.push(m);
                    l.group_call(Helper::Scale, t, g, site, &args)?
                }
                None => y.clone(),
            };
            let mut args = acc.clone();
            args.extend(y);
            l.group_call(Helper::OpInto, t, g, site, &args)
        };
        let inner = match t {
            Type::Map(_, v) => match &**v {
                Type::Int => Some(GroupKind::Int),
                Type::Real => Some(GroupKind::Real),
                Type::Bag(_) => Some(GroupKind::Bag),
                _ => None,
            },
            _ => None,
        };
        let Some(inner) = inner else { return generic(self) };
        let fused = |l: &mut Self| -> R<Vec<Value>> {
            let m = match m {
                Some(m) => m,
                None => l.b().iconst(1),
            };
            let kind = l.b().iconst(inner as i64);
            l.bag_ext("nabla_map_add_scaled", vec![acc[0], y[0], m, kind], site)?;
            Ok(acc.clone())
        };
        match self.known_map_inner.get(&(self.cur_func, g)).copied() {
            Some(k) if k == inner => return fused(self),
            Some(_) => return generic(self),
            None if self.known_group(g).is_some() => return generic(self),
            None => {}
        }
        // At run time: is `g` a `mapGroup` of the builtin group `inner`?
        let gk = self.b().load(ir::Type::I64, g, 0);
        let map = self.b().iconst(GroupKind::Map as i64);
        let is_map = self.b().icmp(Cmp::Eq, gk, map);
        let ok = self.branch(
            is_map,
            &[ir::Type::Bool],
            &mut |l| {
                let h = l.b().load(ir::Type::Ptr, g, 8);
                let hk = l.b().load(ir::Type::I64, h, 0);
                let want = l.b().iconst(inner as i64);
                Ok(vec![l.b().icmp(Cmp::Eq, hk, want)])
            },
            &mut |l| Ok(vec![l.b().bconst(false)]),
        )?;
        self.branch(ok[0], &flat(t), &mut |l| fused(l), &mut |l| generic(l))
    }

    /// The kind of group `g` if it is a builtin group made in this function.
    pub(crate) fn known_group(&self, g: Value) -> Option<GroupKind> {
        self.known_groups.get(&(self.cur_func, g)).copied()
    }

    /// The helper function `h` at type `t` (made on first use).
    fn helper_fn(&mut self, h: Helper, t: &Type) -> FuncId {
        let key = (h, super::type_key(t));
        if let Some(f) = self.helpers.get(&key) {
            return *f;
        }
        let words = flat(t);
        let mut params = Vec::new();
        if h.takes_group() {
            params.push(ir::Type::Ptr);
        }
        if h.takes_site() {
            params.push(ir::Type::I64);
        }
        let rets = match h {
            Helper::Zero => words.clone(),
            Helper::Op | Helper::OpInto | Helper::Eq => {
                params.extend(&words);
                params.extend(&words);
                if h == Helper::Eq {
                    vec![ir::Type::Bool]
                } else {
                    words.clone()
                }
            }
            Helper::Inv | Helper::Fresh => {
                params.extend(&words);
                words.clone()
            }
            Helper::Scale => {
                params.extend(&words);
                params.push(ir::Type::I64);
                words.clone()
            }
        };
        let f = self.new_function(&format!("{}.{}", h.name(), mangle(t)), Signature::new(params, rets));
        self.helpers.insert(key, f);
        self.work.push(Work::Helper(h, t.clone(), f));
        f
    }

    /// Group helper `h` at carrier type `t` on group `g` with the argument words `args`: inline when
    /// `g` is a builtin group made in this function, else a call of the helper.
    pub(crate) fn group_call(&mut self, h: Helper, t: &Type, g: Value, site: Site, args: &[Value]) -> R<Vec<Value>> {
        if let Some(kind) = self.known_groups.get(&(self.cur_func, g)).copied() {
            let n = flat(t).len();
            let a = if h == Helper::Zero { None } else { Some(Self::from_slice(t, &args[..n])?) };
            let b = match h {
                Helper::Op | Helper::OpInto => Some(Self::from_slice(t, &args[n..2 * n])?),
                _ => None,
            };
            let m = if h == Helper::Scale { Some(args[n]) } else { None };
            return self.group_kind(h, kind, t, &GroupArgs { g, site, a, b, m });
        }
        let f = self.helper_fn(h, t);
        let mut all = vec![g];
        if h.takes_site() {
            all.push(self.site_value(site));
        }
        all.extend_from_slice(args);
        Ok(self.call(f, all))
    }

    /// `a == b` with the interpreter's structural equality.
    pub(crate) fn eq_values(&mut self, t: &Type, a: &LVal, b: &LVal) -> R<Value> {
        Ok(match t {
            Type::Int | Type::Bool => self.b().icmp(Cmp::Eq, a.word()?, b.word()?),
            Type::Real => self.b().fcmp(Cmp::Eq, a.word()?, b.word()?),
            Type::Unit => self.b().bconst(true),
            Type::Tuple(ts) => {
                let (xs, ys) = (a.components()?.to_vec(), b.components()?.to_vec());
                let mut acc = self.b().bconst(true);
                for ((t, x), y) in ts.iter().zip(&xs).zip(&ys) {
                    let e = self.eq_values(t, x, y)?;
                    acc = self.b().binary(BinaryOp::And, acc, e);
                }
                acc
            }
            // Functions, groups and duals are never equal (`Value::equals`).
            Type::Fun(..) | Type::Group(_) | Type::Dual(_) => self.b().bconst(false),
            Type::Array(_) | Type::Bag(_) | Type::Map(..) | Type::Delta(_) => {
                let f = self.helper_fn(Helper::Eq, t);
                let mut args = self.materialize(a)?;
                args.extend(self.materialize(b)?);
                self.call(f, args)[0]
            }
            Type::Var(_) => return Err(LowerError::internal(format!("equality at {t}"))),
        })
    }

    /// Is the map value `v` of type `t` a zero (`runtime::value::Value::is_zero_entry`): `0`, `0.0`,
    /// an empty bag, a map of zeros, a tuple of zeros.
    fn is_zero_entry(&mut self, t: &Type, v: &LVal) -> R<Value> {
        Ok(match t {
            Type::Int => {
                let zero = self.b().iconst(0);
                self.b().icmp(Cmp::Eq, v.word()?, zero)
            }
            Type::Real => {
                let zero = self.b().fconst(0.0);
                self.b().fcmp(Cmp::Eq, v.word()?, zero)
            }
            Type::Bag(_) => {
                let n = self.ext1("nabla_bag_len", vec![v.word()?])?;
                let zero = self.b().iconst(0);
                self.b().icmp(Cmp::Eq, n, zero)
            }
            Type::Map(kt, vt) => {
                let yes = self.b().bconst(true);
                self.map_loop(kt, vt, v.word()?, vec![yes], &mut |l, _, _, u, acc| {
                    let z = l.is_zero_entry(vt, &u)?;
                    Ok(vec![l.b().binary(BinaryOp::And, acc[0], z)])
                })?[0]
            }
            Type::Tuple(ts) => {
                let xs = v.components()?.to_vec();
                let mut acc = self.b().bconst(true);
                for (t, x) in ts.iter().zip(&xs) {
                    let z = self.is_zero_entry(t, x)?;
                    acc = self.b().binary(BinaryOp::And, acc, z);
                }
                acc
            }
            _ => self.b().bconst(false),
        })
    }

    /// A copy of `v` whose bags and maps are fresh (so `op_into` may update them).
    fn fresh(&mut self, t: &Type, v: &LVal) -> R<LVal> {
        if !holds_collections(t) {
            return Ok(v.clone());
        }
        match t {
            Type::Tuple(ts) => {
                let xs = v.components()?.to_vec();
                Ok(LVal::Tuple(ts.iter().zip(&xs).map(|(t, x)| self.fresh(t, x)).collect::<R<_>>()?))
            }
            _ => {
                let f = self.helper_fn(Helper::Fresh, t);
                let args = self.materialize(v)?;
                let r = self.call(f, args);
                Self::from_slice(t, &r)
            }
        }
    }

    /// `a <+> da` at type `t` (ILC Def. 2.7): tuples componentwise; `replace v` gives `v`,
    /// `gchange g dv` gives `a ·g dv`.
    pub(crate) fn oplus(&mut self, t: &Type, a: &LVal, da: &LVal, site: Site) -> R<LVal> {
        if let Type::Tuple(ts) = t {
            let (xs, dxs) = (a.components()?.to_vec(), da.components()?.to_vec());
            let mut out = Vec::new();
            for ((t, x), dx) in ts.iter().zip(&xs).zip(&dxs) {
                out.push(self.oplus(t, x, dx, site)?);
            }
            return Ok(LVal::Tuple(out));
        }
        let LVal::Delta(kind, payload) = *da else {
            return Err(LowerError::internal(format!("`<+>` with a change {da:?}")));
        };
        let words = flat(t);
        let zero = self.b().iconst(0);
        let is_replace = self.b().icmp(Cmp::Eq, kind, zero);
        let av = self.materialize(a)?;
        let out = self.branch(is_replace, &words, &mut |l| Ok(l.load_words(&words, payload, 0)), &mut |l| {
            let g = l.b().load(ir::Type::Ptr, payload, 0);
            let mut args = av.clone();
            args.extend(l.load_words(&words, payload, 8));
            l.group_call(Helper::Op, t, g, site, &args)
        })?;
        Self::from_slice(t, &out)
    }

    /// `new <-> old` at type `t`: tuples componentwise; a group change `new · old⁻¹` where `t` has a
    /// canonical group, else `replace new`.
    pub(crate) fn ominus(&mut self, t: &Type, new: &LVal, old: &LVal, site: Site) -> R<LVal> {
        if let Type::Tuple(ts) = t {
            let (ys, xs) = (new.components()?.to_vec(), old.components()?.to_vec());
            let mut out = Vec::new();
            for ((t, y), x) in ts.iter().zip(&ys).zip(&xs) {
                out.push(self.ominus(t, y, x, site)?);
            }
            return Ok(LVal::Tuple(out));
        }
        if !has_canonical_group(t) {
            let kind = self.b().iconst(0);
            return Ok(LVal::Delta(kind, self.boxed(new)?));
        }
        let g = self.canonical_record(t)?;
        let old_words = self.materialize(old)?;
        let inv = self.group_call(Helper::Inv, t, g, site, &old_words)?;
        let mut args = self.materialize(new)?;
        args.extend(inv);
        let d = self.group_call(Helper::Op, t, g, site, &args)?;
        let mut words = vec![g];
        words.extend(d);
        let kind = self.b().iconst(1);
        Ok(LVal::Delta(kind, self.record(&words)))
    }

    /// The record of `t`'s canonical group.
    pub(crate) fn canonical_record(&mut self, t: &Type) -> R<Value> {
        Ok(match t {
            Type::Int => self.group_record(GroupKind::Int, &[]),
            Type::Real => self.group_record(GroupKind::Real, &[]),
            Type::Bag(_) => self.group_record(GroupKind::Bag, &[]),
            Type::Map(_, v) => {
                let inner = self.canonical_record(v)?;
                self.group_record(GroupKind::Map, &[inner])
            }
            Type::Tuple(ts) if ts.len() == 2 => {
                let g1 = self.canonical_record(&ts[0])?;
                let g2 = self.canonical_record(&ts[1])?;
                self.group_record(GroupKind::Pair, &[g1, g2])
            }
            t => return Err(LowerError::internal(format!("no canonical group at {t}"))),
        })
    }

    /// Generates helper `h` at type `t` into `f`.
    pub(crate) fn gen_helper(&mut self, h: Helper, t: &Type, f: FuncId) -> R<()> {
        self.begin(f);
        let ps = self.params();
        let n = flat(t).len();
        match h {
            Helper::Eq => {
                let a = Self::from_slice(t, &ps[..n])?;
                let b = Self::from_slice(t, &ps[n..])?;
                self.gen_eq(t, &a, &b)
            }
            Helper::Fresh => {
                let v = Self::from_slice(t, &ps)?;
                self.gen_fresh(t, &v)
            }
            _ => {
                let g = ps[0];
                let (site, rest) = if h.takes_site() { (Site::Dyn(ps[1]), &ps[2..]) } else { (Site::None, &ps[1..]) };
                let a = if h == Helper::Zero { None } else { Some(Self::from_slice(t, &rest[..n])?) };
                let b = match h {
                    Helper::Op | Helper::OpInto => Some(Self::from_slice(t, &rest[n..2 * n])?),
                    _ => None,
                };
                let m = if h == Helper::Scale { Some(rest[n]) } else { None };
                let args = GroupArgs { g, site, a, b, m };
                let ks = kinds(t);
                let kind = self.b().load(ir::Type::I64, g, 0);
                for (i, k) in ks.iter().enumerate() {
                    if i + 1 < ks.len() {
                        let kv = self.b().iconst(*k as i64);
                        let is = self.b().icmp(Cmp::Eq, kind, kv);
                        let (yes, _) = self.block(&[]);
                        let (no, _) = self.block(&[]);
                        self.b().brif(is, ir::BlockCall::new(yes, vec![]), ir::BlockCall::new(no, vec![]));
                        self.switch_to(yes);
                        let r = self.group_kind(h, *k, t, &args)?;
                        self.b().ret(r);
                        self.switch_to(no);
                    } else {
                        let r = self.group_kind(h, *k, t, &args)?;
                        self.b().ret(r);
                    }
                }
                Ok(())
            }
        }
    }

    /// Helper `h` for groups of kind `k` at carrier `t`: the words of the result.
    fn group_kind(&mut self, h: Helper, k: GroupKind, t: &Type, x: &GroupArgs) -> R<Vec<Value>> {
        let a = || x.a.clone().ok_or_else(|| LowerError::internal("group helper without its operand"));
        let b = || x.b.clone().ok_or_else(|| LowerError::internal("group helper without its operand"));
        let m = || x.m.ok_or_else(|| LowerError::internal("group scaling without its multiplicity"));
        Ok(match k {
            GroupKind::Int | GroupKind::Real => {
                let int = k == GroupKind::Int;
                vec![match h {
                    Helper::Zero if int => self.b().iconst(0),
                    Helper::Zero => self.b().fconst(0.0),
                    Helper::Op | Helper::OpInto => {
                        let op = if int { BinaryOp::Iadd } else { BinaryOp::Fadd };
                        self.b().binary(op, a()?.word()?, b()?.word()?)
                    }
                    Helper::Inv => self.b().unary(if int { UnaryOp::Ineg } else { UnaryOp::Fneg }, a()?.word()?),
                    Helper::Scale if int => self.b().binary(BinaryOp::Imul, a()?.word()?, m()?),
                    Helper::Scale => {
                        let mf = self.b().unary(UnaryOp::Itof, m()?);
                        self.b().binary(BinaryOp::Fmul, a()?.word()?, mf)
                    }
                    Helper::Eq | Helper::Fresh => return Err(LowerError::internal("not a group helper")),
                }]
            }
            GroupKind::Bag => vec![match h {
                Helper::Zero => {
                    let kw = match t {
                        Type::Bag(e) => flat(e).len(),
                        _ => 0,
                    };
                    let w = self.b().iconst(kw as i64);
                    self.ext1("nabla_bag_new", vec![w])?
                }
                Helper::Op => self.bag_ext1("nabla_bag_merge", vec![a()?.word()?, b()?.word()?], x.site)?,
                Helper::OpInto => {
                    let acc = a()?.word()?;
                    self.bag_ext("nabla_bag_add_into", vec![acc, b()?.word()?], x.site)?;
                    acc
                }
                Helper::Inv => self.bag_ext1("nabla_bag_negate", vec![a()?.word()?], x.site)?,
                Helper::Scale => self.bag_ext1("nabla_bag_scale", vec![a()?.word()?, m()?], x.site)?,
                Helper::Eq | Helper::Fresh => return Err(LowerError::internal("not a group helper")),
            }],
            GroupKind::Map => {
                let (kt, vt) = map_types(t)?;
                let (kw, vw) = (flat(&kt).len(), flat(&vt).len());
                let inner = self.b().load(ir::Type::Ptr, x.g, 8);
                vec![match h {
                    Helper::Zero => self.map_new(kw, vw)?,
                    Helper::Op => {
                        let out = self.ext1("nabla_map_clone", vec![a()?.word()?])?;
                        self.combine_maps(&kt, &vt, inner, out, b()?.word()?, false, x.site)?;
                        out
                    }
                    Helper::OpInto => {
                        let acc = a()?.word()?;
                        self.combine_maps(&kt, &vt, inner, acc, b()?.word()?, true, x.site)?;
                        acc
                    }
                    Helper::Inv => {
                        let out = self.map_new(kw, vw)?;
                        let scratch = self.scratch(vw);
                        let site = x.site;
                        self.map_loop(&kt, &vt, a()?.word()?, vec![], &mut |l, rec, _, v, _| {
                            let words = l.materialize(&v)?;
                            let iv = l.group_call(Helper::Inv, &vt, inner, site, &words)?;
                            l.store_words(&iv, scratch, 0);
                            l.ext("nabla_map_set", vec![out, rec, scratch])?;
                            Ok(vec![])
                        })?;
                        out
                    }
                    Helper::Scale => {
                        let out = self.map_new(kw, vw)?;
                        let zero = self.group_call(Helper::Zero, &vt, inner, Site::None, &[])?;
                        let zero = Self::from_slice(&vt, &zero)?;
                        let scratch = self.scratch(vw);
                        let (site, mult) = (x.site, m()?);
                        self.map_loop(&kt, &vt, a()?.word()?, vec![], &mut |l, rec, _, v, _| {
                            let mut words = l.materialize(&v)?;
                            words.push(mult);
                            let s = l.group_call(Helper::Scale, &vt, inner, site, &words)?;
                            let sv = Self::from_slice(&vt, &s)?;
                            let is_zero = l.eq_values(&vt, &sv, &zero)?;
                            l.branch(is_zero, &[], &mut |_| Ok(vec![]), &mut |l| {
                                l.store_words(&s, scratch, 0);
                                l.ext("nabla_map_set", vec![out, rec, scratch])?;
                                Ok(vec![])
                            })?;
                            Ok(vec![])
                        })?;
                        out
                    }
                    Helper::Eq | Helper::Fresh => return Err(LowerError::internal("not a group helper")),
                }]
            }
            GroupKind::Pair => {
                let (t1, t2) = pair_types(t)?;
                let g1 = self.b().load(ir::Type::Ptr, x.g, 8);
                let g2 = self.b().load(ir::Type::Ptr, x.g, 16);
                let part = |v: &Option<LVal>, i: usize| -> R<Option<LVal>> {
                    match v {
                        Some(v) => Ok(Some(v.components()?[i].clone())),
                        None => Ok(None),
                    }
                };
                let first = GroupArgs { g: g1, site: x.site, a: part(&x.a, 0)?, b: part(&x.b, 0)?, m: x.m };
                let second = GroupArgs { g: g2, site: x.site, a: part(&x.a, 1)?, b: part(&x.b, 1)?, m: x.m };
                let mut out = self.group_on(h, &t1, &first)?;
                out.extend(self.group_on(h, &t2, &second)?);
                out
            }
            GroupKind::User => {
                let op_ty = Type::fun(t.clone(), Type::fun(t.clone(), t.clone()));
                let inv_ty = Type::fun(t.clone(), t.clone());
                match h {
                    Helper::Zero => self.load_words(&flat(t), x.g, USER_ZERO),
                    Helper::Op | Helper::OpInto => {
                        let op = self.user_closure(x.g, USER_OP, op_ty);
                        let r = self.apply(op, vec![(a()?, x.site), (b()?, x.site)])?;
                        self.materialize(&r)?
                    }
                    Helper::Inv => {
                        let inv = self.user_closure(x.g, USER_INVERSE, inv_ty);
                        let r = self.apply(inv, vec![(a()?, x.site)])?;
                        self.materialize(&r)?
                    }
                    Helper::Scale => {
                        let op = self.user_closure(x.g, USER_OP, op_ty);
                        let inv = self.user_closure(x.g, USER_INVERSE, inv_ty);
                        self.user_scale(t, x.g, op, inv, a()?, m()?, x.site)?
                    }
                    Helper::Eq | Helper::Fresh => return Err(LowerError::internal("not a group helper")),
                }
            }
        })
    }

    /// Helper `h` on a component group, through its helper function.
    fn group_on(&mut self, h: Helper, t: &Type, x: &GroupArgs) -> R<Vec<Value>> {
        let mut args = Vec::new();
        if let Some(a) = &x.a {
            args.extend(self.materialize(a)?);
        }
        if let Some(b) = &x.b {
            args.extend(self.materialize(b)?);
        }
        if let Some(m) = x.m {
            args.push(m);
        }
        self.group_call(h, t, x.g, x.site, &args)
    }

    /// A closure stored in a user group's record at `offset`.
    fn user_closure(&mut self, g: Value, offset: i32, ty: Type) -> LVal {
        let tag = self.b().load(ir::Type::I64, g, offset);
        let env = self.b().load(ir::Type::Ptr, g, offset + 8);
        LVal::Fun(Clo::Dyn { ty, tag, env })
    }

    /// `a` combined with itself `m` times in a user group, by doubling (with the inverse when
    /// `m < 0`), exactly as `runtime::interp::groups::group_scale` does.
    #[allow(clippy::too_many_arguments)]
    fn user_scale(&mut self, t: &Type, g: Value, op: LVal, inv: LVal, a: LVal, m: Value, site: Site) -> R<Vec<Value>> {
        let tys = flat(t);
        let zero_i = self.b().iconst(0);
        let negative = self.b().icmp(Cmp::Lt, m, zero_i);
        let a_words = self.materialize(&a)?;
        let base = self.branch(
            negative,
            &tys,
            &mut |l| {
                let r = l.apply(inv.clone(), vec![(a.clone(), site)])?;
                l.materialize(&r)
            },
            &mut |_| Ok(a_words.clone()),
        )?;
        let acc = self.load_words(&tys, g, USER_ZERO);
        let neg_m = self.b().unary(UnaryOp::Ineg, m);
        let n = self.b().select(negative, neg_m, m);
        // Loop on n (|m| as an unsigned number; only i64::MIN is negative) with acc and base.
        let mut htys = vec![ir::Type::I64];
        htys.extend(&tys);
        htys.extend(&tys);
        let (header, hp) = self.block(&htys);
        let (body, _) = self.block(&[]);
        let (exit, ep) = self.block(&tys);
        let mut args = vec![n];
        args.extend(acc);
        args.extend(base);
        self.b().jump(header, args);
        self.switch_to(header);
        let k = tys.len();
        let (n, acc, base) = (hp[0], hp[1..1 + k].to_vec(), hp[1 + k..].to_vec());
        let more = self.b().icmp(Cmp::Ne, n, zero_i);
        self.b().brif(more, ir::BlockCall::new(body, vec![]), ir::BlockCall::new(exit, acc.clone()));
        self.switch_to(body);
        let two = self.b().iconst(2);
        let low = self.b().binary(BinaryOp::Srem, n, two);
        let bit = self.b().icmp(Cmp::Ne, low, zero_i);
        let acc_v = Self::from_slice(t, &acc)?;
        let base_v = Self::from_slice(t, &base)?;
        let acc2 = self.branch(
            bit,
            &tys,
            &mut |l| {
                let r = l.apply(op.clone(), vec![(acc_v.clone(), site), (base_v.clone(), site)])?;
                l.materialize(&r)
            },
            &mut |_| Ok(acc.clone()),
        )?;
        // n >>= 1 (logical): n / 2, negated back for i64::MIN.
        let q = self.b().binary(BinaryOp::Sdiv, n, two);
        let nq = self.b().unary(UnaryOp::Ineg, q);
        let was_neg = self.b().icmp(Cmp::Lt, n, zero_i);
        let half = self.b().select(was_neg, nq, q);
        let again = self.b().icmp(Cmp::Ne, half, zero_i);
        let base2 = self.branch(
            again,
            &tys,
            &mut |l| {
                let r = l.apply(op.clone(), vec![(base_v.clone(), site), (base_v.clone(), site)])?;
                l.materialize(&r)
            },
            &mut |_| Ok(base.clone()),
        )?;
        let mut args = vec![half];
        args.extend(acc2);
        args.extend(base2);
        self.b().jump(header, args);
        self.switch_to(exit);
        Ok(ep)
    }

    /// Adds map `y` into map `out` (`out` is fresh): per key of `y`, the inner group's operation
    /// with `out`'s value if any, dropping keys whose value becomes the inner zero.
    #[allow(clippy::too_many_arguments)]
    fn combine_maps(
        &mut self,
        kt: &Type,
        vt: &Type,
        inner: Value,
        out: Value,
        y: Value,
        in_place: bool,
        site: Site,
    ) -> R<()> {
        let vw = flat(vt);
        let zero = self.group_call(Helper::Zero, vt, inner, Site::None, &[])?;
        let zero = Self::from_slice(vt, &zero)?;
        let scratch = self.scratch(vw.len());
        self.map_loop(kt, vt, y, vec![], &mut |l, rec, _, vy, _| {
            let found = l.ext1("nabla_map_get", vec![out, rec, scratch])?;
            let vy_words = l.materialize(&vy)?;
            let combined = l.branch(
                found,
                &vw,
                &mut |l| {
                    let mut args = l.load_words(&vw, scratch, 0);
                    args.extend(vy_words.iter().copied());
                    let h = if in_place { Helper::OpInto } else { Helper::Op };
                    l.group_call(h, vt, inner, site, &args)
                },
                &mut |l| {
                    if in_place {
                        let v = l.fresh(vt, &vy)?;
                        l.materialize(&v)
                    } else {
                        Ok(vy_words.clone())
                    }
                },
            )?;
            let cv = Self::from_slice(vt, &combined)?;
            let is_zero = l.eq_values(vt, &cv, &zero)?;
            l.branch(
                is_zero,
                &[],
                &mut |l| {
                    l.ext("nabla_map_remove", vec![out, rec])?;
                    Ok(vec![])
                },
                &mut |l| {
                    l.store_words(&combined, scratch, 0);
                    l.ext("nabla_map_set", vec![out, rec, scratch])?;
                    Ok(vec![])
                },
            )?;
            Ok(vec![])
        })?;
        Ok(())
    }

    /// The body of `eq` at an array, bag, map or change type.
    fn gen_eq(&mut self, t: &Type, a: &LVal, b: &LVal) -> R<()> {
        let (fail, _) = self.block(&[]);
        let ret_false = |l: &mut Self| {
            let saved = l.cur_block;
            l.switch_to(fail);
            let f = l.b().bconst(false);
            l.b().ret(vec![f]);
            l.switch_to(saved);
        };
        // Continue if `c`, else return false.
        let check = |l: &mut Self, c: Value| {
            let (ok, _) = l.block(&[]);
            l.b().brif(c, ir::BlockCall::new(ok, vec![]), ir::BlockCall::new(fail, vec![]));
            l.switch_to(ok);
        };
        match t {
            Type::Bag(_) => {
                let r = self.ext1("nabla_bag_eq", vec![a.word()?, b.word()?])?;
                check(self, r);
            }
            Type::Array(et) => {
                let (x, y) = (a.word()?, b.word()?);
                let n = self.b().array_len(x);
                let m = self.b().array_len(y);
                let same = self.b().icmp(Cmp::Eq, n, m);
                check(self, same);
                let st = 8 * flat(et).len() as u32;
                self.counted_loop(n, vec![], &mut |l, i, _| {
                    let p = l.b().elem_addr(x, i, st);
                    let u = l.load_value(et, p, 0)?;
                    let q = l.b().elem_addr(y, i, st);
                    let v = l.load_value(et, q, 0)?;
                    let e = l.eq_values(et, &u, &v)?;
                    check(l, e);
                    Ok(vec![])
                })?;
            }
            // Equal up to zero-valued entries (`runtime::value::Value::equals`): each entry of `x`
            // equals `y`'s or, absent there, is zero; each entry of `y` absent from `x` is zero.
            Type::Map(kt, vt) => {
                let (x, y) = (a.word()?, b.word()?);
                let scratch = self.scratch(flat(vt).len());
                self.map_loop(kt, vt, x, vec![], &mut |l, rec, _, u, _| {
                    let found = l.ext1("nabla_map_get", vec![y, rec, scratch])?;
                    let e = l.branch(
                        found,
                        &[ir::Type::Bool],
                        &mut |l| {
                            let v = l.load_value(vt, scratch, 0)?;
                            Ok(vec![l.eq_values(vt, &u, &v)?])
                        },
                        &mut |l| Ok(vec![l.is_zero_entry(vt, &u)?]),
                    )?;
                    check(l, e[0]);
                    Ok(vec![])
                })?;
                self.map_loop(kt, vt, y, vec![], &mut |l, rec, _, w, _| {
                    let found = l.ext1("nabla_map_get", vec![x, rec, scratch])?;
                    let e = l.branch(found, &[ir::Type::Bool], &mut |l| Ok(vec![l.b().bconst(true)]), &mut |l| {
                        Ok(vec![l.is_zero_entry(vt, &w)?])
                    })?;
                    check(l, e[0]);
                    Ok(vec![])
                })?;
            }
            Type::Delta(bt) => {
                let (LVal::Delta(ka, pa), LVal::Delta(kb, pb)) = (a, b) else {
                    return Err(LowerError::internal("equality of changes without changes"));
                };
                let (ka, pa, kb, pb) = (*ka, *pa, *kb, *pb);
                let same = self.b().icmp(Cmp::Eq, ka, kb);
                check(self, same);
                let zero = self.b().iconst(0);
                let replace = self.b().icmp(Cmp::Eq, ka, zero);
                // `replace x` compares `x`; `gchange g dx` compares `dx` (after the group pointer).
                let r = self.branch(
                    replace,
                    &[ir::Type::Bool],
                    &mut |l| {
                        let u = l.load_value(bt, pa, 0)?;
                        let v = l.load_value(bt, pb, 0)?;
                        Ok(vec![l.eq_values(bt, &u, &v)?])
                    },
                    &mut |l| {
                        let u = l.load_value(bt, pa, 8)?;
                        let v = l.load_value(bt, pb, 8)?;
                        Ok(vec![l.eq_values(bt, &u, &v)?])
                    },
                )?;
                check(self, r[0]);
            }
            t => return Err(LowerError::internal(format!("no equality helper at {t}"))),
        }
        let t = self.b().bconst(true);
        self.b().ret(vec![t]);
        ret_false(self);
        Ok(())
    }

    /// The body of `fresh` at a bag or map type.
    fn gen_fresh(&mut self, t: &Type, v: &LVal) -> R<()> {
        let r = match t {
            Type::Bag(_) => self.ext1("nabla_bag_clone", vec![v.word()?])?,
            Type::Map(kt, vt) => {
                let out = self.ext1("nabla_map_clone", vec![v.word()?])?;
                if holds_collections(vt) {
                    let scratch = self.scratch(flat(vt).len());
                    self.map_loop(kt, vt, v.word()?, vec![], &mut |l, rec, _, x, _| {
                        let c = l.fresh(vt, &x)?;
                        l.store_value(&c, scratch, 0)?;
                        l.ext("nabla_map_set", vec![out, rec, scratch])?;
                        Ok(vec![])
                    })?;
                }
                out
            }
            t => return Err(LowerError::internal(format!("no copy helper at {t}"))),
        };
        self.b().ret(vec![r]);
        Ok(())
    }
}
