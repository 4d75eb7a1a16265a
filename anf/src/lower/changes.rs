//! ILC's change machinery compiled: `nil` at types without functions, the placeholder `_` that
//! dead-code elimination leaves for an unread base value, and the derivative primitives of
//! `adjoint::incremental::table` (`merge'`, `foldBag'`, `lookup'`, …).
//!
//! Each derivative primitive lowers like its interpreter case (`runtime::interp::incremental`),
//! path by path and in the same order: a fast path on a `gchange` in the group it expects, a
//! `replace` path, and a slow path that reads the base value. Where dead-code elimination replaced
//! that base by `_`, the slow path traps with `NeedsBase` (the incremental driver then runs the
//! total derivative). `_` is known statically: lowering marks the placeholder words it makes for
//! it, and the primitives check their arguments for the mark (dead-code elimination puts `_` only
//! directly in a primitive's argument position).
//!
//! (`derive`, `⊕`/`⊖` at function types and `nil` of functions never get here:
//! `adjoint::incremental::expand` rewrites them into ordinary terms first.)

use frontend::builtins::Builtin;
use frontend::types::Type;

use super::groups::{GroupKind, Helper};
use super::value::{after_args, arg_type, flat};
use super::{LVal, LowerError, Lowerer, Site, Work, R};
use crate::ir::{self, BinaryOp, Cmp, FuncId, Signature, TrapCode, Value};

/// `t` for `Group t`.
fn carrier(t: &Type) -> Type {
    match t {
        Type::Group(a) => (**a).clone(),
        t => t.clone(),
    }
}

/// Does `t` have a function type in it (where a change is not a value lowering builds here)?
fn has_function(t: &Type) -> bool {
    let mut found = false;
    t.visit(&mut |u| found = found || matches!(u, Type::Fun(..) | Type::Dual(_)));
    found
}

fn fun_ty(params: &[Type], res: Type) -> Type {
    params.iter().rev().fold(res, |r, a| Type::fun(a.clone(), r))
}

impl Lowerer<'_> {
    /// `_`: placeholder words of type `ty`, marked so the derivative primitives know them.
    pub(crate) fn no_base(&mut self, ty: &Type) -> R<LVal> {
        let words: Vec<Value> = flat(ty)
            .into_iter()
            .map(|t| match t {
                ir::Type::I64 => self.b().iconst(0),
                ir::Type::F64 => self.b().fconst(0.0),
                ir::Type::Bool => self.b().bconst(false),
                ir::Type::Ptr => self.b().null(),
            })
            .collect();
        if let Some(w) = words.first() {
            self.no_base_words.insert((self.cur_func, *w));
        }
        Self::from_slice(ty, &words)
    }

    /// Is `v` the placeholder `_`?
    fn is_no_base(&mut self, v: &LVal) -> R<bool> {
        fn first(v: &LVal) -> Option<Value> {
            match v {
                LVal::Word(w) => Some(*w),
                LVal::Delta(k, _) => Some(*k),
                LVal::Tuple(vs) => vs.iter().find_map(first),
                LVal::Fun(super::Clo::Dyn { tag, .. }) => Some(*tag),
                LVal::Unit | LVal::Fun(_) => None,
            }
        }
        Ok(first(v).is_some_and(|w| self.no_base_words.contains(&(self.cur_func, w))))
    }

    /// The base value `v`, or a `NeedsBase` trap where it is `_`.
    fn need(&mut self, v: &LVal, site: Site) -> R<()> {
        if self.is_no_base(v)? {
            let t = self.b().bconst(true);
            let z = self.b().iconst(0);
            self.fail_if(t, TrapCode::NeedsBase, site, z, z);
        }
        Ok(())
    }

    /// `nil v` at a type without functions (ILC Def. 2.2): tuples componentwise, `gchange g zero`
    /// for a type with a canonical group, else `replace v`.
    pub(crate) fn nil_change(&mut self, t: &Type, v: &LVal) -> R<LVal> {
        match t {
            Type::Tuple(ts) => {
                let xs = v.components()?.to_vec();
                let mut out = Vec::new();
                for (t, x) in ts.iter().zip(&xs) {
                    out.push(self.nil_change(t, x)?);
                }
                Ok(LVal::Tuple(out))
            }
            Type::Fun(..) | Type::Dual(_) => Err(LowerError::internal(
                "`nil` of a function reached lowering: run `adjoint::incremental::expand` first",
            )),
            t if super::groups::has_canonical_group(t) => {
                let g = self.canonical_record(t)?;
                let z = self.group_call(Helper::Zero, t, g, Site::None, &[])?;
                let z = Self::from_slice(t, &z)?;
                Ok(self.mk_gchange(g, &z)?)
            }
            _ => self.mk_replace(v),
        }
    }

    fn mk_gchange(&mut self, g: Value, d: &LVal) -> R<LVal> {
        let mut words = vec![g];
        words.extend(self.materialize(d)?);
        let k = self.b().iconst(1);
        Ok(LVal::Delta(k, self.record(&words)))
    }

    fn mk_replace(&mut self, v: &LVal) -> R<LVal> {
        let k = self.b().iconst(0);
        Ok(LVal::Delta(k, self.boxed(v)?))
    }

    fn delta_parts(d: &LVal) -> R<(Value, Value)> {
        match d {
            LVal::Delta(k, p) => Ok((*k, *p)),
            d => Err(LowerError::internal(format!("expected a change, found {d:?}"))),
        }
    }

    /// Is change `d` a `replace`?
    fn is_replace(&mut self, d: &LVal) -> R<Value> {
        let (k, _) = Self::delta_parts(d)?;
        let zero = self.b().iconst(0);
        Ok(self.b().icmp(Cmp::Eq, k, zero))
    }

    /// Is change `d` a `gchange` whose group has kind `kind`?
    fn is_gchange_of_kind(&mut self, d: &LVal, kind: GroupKind) -> R<Value> {
        let (k, p) = Self::delta_parts(d)?;
        let one = self.b().iconst(1);
        let is_g = self.b().icmp(Cmp::Eq, k, one);
        let r = self.branch(
            is_g,
            &[ir::Type::Bool],
            &mut |l| {
                let g = l.b().load(ir::Type::Ptr, p, 0);
                let gk = l.b().load(ir::Type::I64, g, 0);
                let want = l.b().iconst(kind as i64);
                Ok(vec![l.b().icmp(Cmp::Eq, gk, want)])
            },
            &mut |l| Ok(vec![l.b().bconst(false)]),
        )?;
        Ok(r[0])
    }

    /// Is change `d` a `gchange` in a group that acts as `mapGroup g` (`g` at carrier `vt`)?
    fn is_gchange_in_map_group(&mut self, d: &LVal, g: Value, vt: &Type) -> R<Value> {
        let is_map = self.is_gchange_of_kind(d, GroupKind::Map)?;
        let (_, p) = Self::delta_parts(d)?;
        let vt = vt.clone();
        let r = self.branch(
            is_map,
            &[ir::Type::Bool],
            &mut |l| {
                let h = l.b().load(ir::Type::Ptr, p, 0);
                let inner = l.b().load(ir::Type::Ptr, h, 8);
                Ok(vec![l.same_group(&vt, inner, g)])
            },
            &mut |l| Ok(vec![l.b().bconst(false)]),
        )?;
        Ok(r[0])
    }

    /// The new value of a `replace` change of a `t`.
    fn replaced(&mut self, d: &LVal, t: &Type) -> R<LVal> {
        let (_, p) = Self::delta_parts(d)?;
        self.load_value(t, p, 0)
    }

    /// The group element of a `gchange` of a `t`, and its group.
    fn gchanged(&mut self, d: &LVal, t: &Type) -> R<(Value, LVal)> {
        let (_, p) = Self::delta_parts(d)?;
        let g = self.b().load(ir::Type::Ptr, p, 0);
        Ok((g, self.load_value(t, p, 8)?))
    }

    /// Do groups `g` and `h` of carrier `t` act the same? As the interpreter's `same_group`:
    /// builtin groups structurally, user groups when they hold the same closures and zero.
    fn same_group(&mut self, t: &Type, g: Value, h: Value) -> Value {
        let f = self.change_helper(t);
        self.call(f, vec![g, h])[0]
    }

    fn change_helper(&mut self, t: &Type) -> FuncId {
        let key = super::type_key(t);
        if let Some(f) = self.same_group_fns.get(&key) {
            return *f;
        }
        let sig = Signature::new(vec![ir::Type::Ptr, ir::Type::Ptr], vec![ir::Type::Bool]);
        let f = self.new_function(&format!("group.same.{}", super::mangle(t)), sig);
        self.same_group_fns.insert(key, f);
        self.work.push(Work::SameGroup(t.clone(), f));
        f
    }

    /// The body of `group.same` at carrier `t`.
    pub(crate) fn gen_same_group(&mut self, t: &Type, f: FuncId) -> R<()> {
        self.begin(f);
        let ps = self.params();
        let (g, h) = (ps[0], ps[1]);
        let yes = self.b().bconst(true);
        let no = self.b().bconst(false);
        let same_ptr = self.b().icmp(Cmp::Eq, g, h);
        let (ret_yes, _) = self.block(&[]);
        let (cont, _) = self.block(&[]);
        self.b().brif(same_ptr, ir::BlockCall::new(ret_yes, vec![]), ir::BlockCall::new(cont, vec![]));
        self.switch_to(ret_yes);
        self.b().ret(vec![yes]);
        self.switch_to(cont);
        let gk = self.b().load(ir::Type::I64, g, 0);
        let hk = self.b().load(ir::Type::I64, h, 0);
        let same_kind = self.b().icmp(Cmp::Eq, gk, hk);
        let (kinds_eq, _) = self.block(&[]);
        let (ret_no, _) = self.block(&[]);
        self.b().brif(same_kind, ir::BlockCall::new(kinds_eq, vec![]), ir::BlockCall::new(ret_no, vec![]));
        self.switch_to(ret_no);
        self.b().ret(vec![no]);
        self.switch_to(kinds_eq);
        let user = self.b().iconst(GroupKind::User as i64);
        let is_user = self.b().icmp(Cmp::Eq, gk, user);
        let t2 = t.clone();
        let r = self.branch(
            is_user,
            &[ir::Type::Bool],
            &mut |l| {
                // [5, op tag, op env, inverse tag, inverse env, zero…]
                let mut acc = l.b().bconst(true);
                for off in [8, 16, 24, 32] {
                    let a = l.b().load(ir::Type::I64, g, off);
                    let b = l.b().load(ir::Type::I64, h, off);
                    let e = l.b().icmp(Cmp::Eq, a, b);
                    acc = l.b().binary(BinaryOp::And, acc, e);
                }
                let za = l.load_value(&t2, g, 40)?;
                let zb = l.load_value(&t2, h, 40)?;
                let e = l.eq_values(&t2, &za, &zb)?;
                Ok(vec![l.b().binary(BinaryOp::And, acc, e)])
            },
            &mut |l| {
                Ok(vec![match &t2 {
                    Type::Map(_, v) => {
                        let gi = l.b().load(ir::Type::Ptr, g, 8);
                        let hi = l.b().load(ir::Type::Ptr, h, 8);
                        l.same_group(v, gi, hi)
                    }
                    Type::Tuple(ts) if ts.len() == 2 => {
                        let g1 = l.b().load(ir::Type::Ptr, g, 8);
                        let h1 = l.b().load(ir::Type::Ptr, h, 8);
                        let g2 = l.b().load(ir::Type::Ptr, g, 16);
                        let h2 = l.b().load(ir::Type::Ptr, h, 16);
                        let a = l.same_group(&ts[0], g1, h1);
                        let b = l.same_group(&ts[1], g2, h2);
                        l.b().binary(BinaryOp::And, a, b)
                    }
                    // Int, Real, Bag: one group each.
                    _ => l.b().bconst(true),
                }])
            },
        )?;
        self.b().ret(r);
        Ok(())
    }

    /// Can `· v` in group `g` at type `t` be written as a change without the base? (The
    /// interpreter's `group_change_at`: a pair group at a pair type, recursively; any group at a
    /// base type.)
    fn group_change_ok(&mut self, g: Value, t: &Type) -> R<Value> {
        Ok(match t {
            Type::Tuple(ts) if ts.len() == 2 => {
                let gk = self.b().load(ir::Type::I64, g, 0);
                let pair = self.b().iconst(GroupKind::Pair as i64);
                let is_pair = self.b().icmp(Cmp::Eq, gk, pair);
                let ts = ts.clone();
                self.branch(
                    is_pair,
                    &[ir::Type::Bool],
                    &mut |l| {
                        let g1 = l.b().load(ir::Type::Ptr, g, 8);
                        let g2 = l.b().load(ir::Type::Ptr, g, 16);
                        let a = l.group_change_ok(g1, &ts[0])?;
                        let b = l.group_change_ok(g2, &ts[1])?;
                        Ok(vec![l.b().binary(BinaryOp::And, a, b)])
                    },
                    &mut |l| Ok(vec![l.b().bconst(false)]),
                )?[0]
            }
            Type::Tuple(_) | Type::Fun(..) | Type::Dual(_) => self.b().bconst(false),
            _ => self.b().bconst(true),
        })
    }

    /// `· v` in group `g` as a change of `t` (only where `group_change_ok` holds).
    fn group_change_at(&mut self, g: Value, v: &LVal, t: &Type) -> R<LVal> {
        match t {
            Type::Tuple(ts) if ts.len() == 2 => {
                let vs = v.components()?.to_vec();
                let g1 = self.b().load(ir::Type::Ptr, g, 8);
                let g2 = self.b().load(ir::Type::Ptr, g, 16);
                let a = self.group_change_at(g1, &vs[0], &ts[0])?;
                let b = self.group_change_at(g2, &vs[1], &ts[1])?;
                Ok(LVal::Tuple(vec![a, b]))
            }
            _ => self.mk_gchange(g, v),
        }
    }

    /// `replace v` at `t`, componentwise on tuples.
    fn replace_at(&mut self, v: &LVal, t: &Type) -> R<LVal> {
        match t {
            Type::Tuple(ts) => {
                let vs = v.components()?.to_vec();
                let mut out = Vec::new();
                for (t, x) in ts.iter().zip(&vs) {
                    out.push(self.replace_at(x, t)?);
                }
                Ok(LVal::Tuple(out))
            }
            _ => self.mk_replace(v),
        }
    }

    /// The element `d` of group `g` with `base · d = base ⊕ dv`: `dv`'s own element when `is_in_g`
    /// holds, else computed from the base (a `NeedsBase` trap where the base is `_`).
    #[allow(clippy::too_many_arguments)]
    fn group_delta(&mut self, base: &LVal, dv: &LVal, g: Value, is_in_g: Value, t: &Type, site: Site) -> R<LVal> {
        let words = flat(t);
        let out = self.branch(
            is_in_g,
            &words,
            &mut |l| {
                let (_, d) = l.gchanged(dv, t)?;
                l.materialize(&d)
            },
            &mut |l| {
                l.need(base, site)?;
                let new = l.oplus(t, base, dv, site)?;
                let bw = l.materialize(base)?;
                let inv = l.group_call(Helper::Inv, t, g, site, &bw)?;
                let mut args = l.materialize(&new)?;
                args.extend(inv);
                l.group_call(Helper::Op, t, g, site, &args)
            },
        )?;
        Self::from_slice(t, &out)
    }

    /// The three paths of a derivative primitive on a collection change `dc` of type `ct`: `fast`
    /// when `fast_ok` holds, `replace` (given the new collection) when `dc` replaces it, else the
    /// difference of `f` at the updated and the old base (`NeedsBase` where the base is `_`).
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::type_complexity)]
    fn three_paths(
        &mut self,
        res: &Type,
        out_ty: &Type,
        ct: &Type,
        base: &LVal,
        dc: &LVal,
        fast_ok: Value,
        site: Site,
        fast: &mut dyn FnMut(&mut Self) -> R<LVal>,
        f: &mut dyn FnMut(&mut Self, LVal) -> R<LVal>,
    ) -> R<LVal> {
        let words = flat(res);
        let is_replace = self.is_replace(dc)?;
        let f = std::cell::RefCell::new(f);
        let out = self.branch(
            fast_ok,
            &words,
            &mut |l| {
                let v = fast(l)?;
                l.materialize(&v)
            },
            &mut |l| {
                l.branch(
                    is_replace,
                    &words,
                    &mut |l| {
                        let c1 = l.replaced(dc, ct)?;
                        let v = (f.borrow_mut())(l, c1)?;
                        let r = l.replace_at(&v, out_ty)?;
                        l.materialize(&r)
                    },
                    &mut |l| {
                        l.need(base, site)?;
                        let c1 = l.oplus(ct, base, dc, site)?;
                        let new = (f.borrow_mut())(l, c1)?;
                        let old = (f.borrow_mut())(l, base.clone())?;
                        let d = l.ominus(out_ty, &new, &old, site)?;
                        l.materialize(&d)
                    },
                )
            },
        )?;
        Self::from_slice(res, &out)
    }

    /// A saturated derivative primitive `b` of monomorphic type `ty`.
    pub(crate) fn change_builtin(&mut self, b: Builtin, ty: &Type, args: Vec<LVal>, site: Site) -> R<LVal> {
        use Builtin as B;
        let res = after_args(ty, b.arity())?;
        if has_function(&res) {
            return Err(LowerError::unsupported(frontend::Span::SYNTHETIC, format!("`{}` on functions", b.name())));
        }
        let p = |i: usize| arg_type(ty, i);
        Ok(match b {
            // ILC Sec. 3.7: Derive(merge) = λu du v dv. merge du dv (bag-group changes).
            B::DMerge => {
                let bt = p(0)?;
                let (x, dx, y, dy) = (&args[0], &args[1], &args[2], &args[3]);
                let rx = self.is_replace(dx)?;
                let ry = self.is_replace(dy)?;
                let both = self.b().binary(BinaryOp::And, rx, ry);
                let words = flat(&res);
                let out = self.branch(
                    both,
                    &words,
                    &mut |l| {
                        let (a, c) = (l.replaced(dx, &bt)?, l.replaced(dy, &bt)?);
                        let m = l.bag_ext1("nabla_bag_merge", vec![a.word()?, c.word()?], site)?;
                        let r = l.mk_replace(&LVal::Word(m))?;
                        l.materialize(&r)
                    },
                    &mut |l| {
                        let g = l.group_record(GroupKind::Bag, &[]);
                        let in_x = l.is_gchange_of_kind(dx, GroupKind::Bag)?;
                        let a = l.group_delta(x, dx, g, in_x, &bt, site)?;
                        let in_y = l.is_gchange_of_kind(dy, GroupKind::Bag)?;
                        let c = l.group_delta(y, dy, g, in_y, &bt, site)?;
                        let m = l.bag_ext1("nabla_bag_merge", vec![a.word()?, c.word()?], site)?;
                        let r = l.mk_gchange(g, &LVal::Word(m))?;
                        l.materialize(&r)
                    },
                )?;
                Self::from_slice(&res, &out)?
            }
            // negate is the bag group's inverse, a homomorphism: its change is the negated change.
            B::DNegate => {
                let bt = p(0)?;
                let (x, dx) = (&args[0], &args[1]);
                let rx = self.is_replace(dx)?;
                let out = self.branch(
                    rx,
                    &flat(&res),
                    &mut |l| {
                        let a = l.replaced(dx, &bt)?;
                        let m = l.bag_ext1("nabla_bag_negate", vec![a.word()?], site)?;
                        let r = l.mk_replace(&LVal::Word(m))?;
                        l.materialize(&r)
                    },
                    &mut |l| {
                        let g = l.group_record(GroupKind::Bag, &[]);
                        let in_x = l.is_gchange_of_kind(dx, GroupKind::Bag)?;
                        let a = l.group_delta(x, dx, g, in_x, &bt, site)?;
                        let m = l.bag_ext1("nabla_bag_negate", vec![a.word()?], site)?;
                        let r = l.mk_gchange(g, &LVal::Word(m))?;
                        l.materialize(&r)
                    },
                )?;
                Self::from_slice(&res, &out)?
            }
            // ILC Sec. 2.1 (the group of integers): (x + a) + (y + b) = (x + y) + (a + b); and
            // (x + a)(y + b) - xy = x·b + a·y + a·b.
            B::DAdd | B::DSub | B::DMul => {
                let t = p(0)?;
                let int = t == Type::Int;
                let (x, dx, y, dy) = (&args[0], &args[1], &args[2], &args[3]);
                let op = |l: &mut Self, which: Builtin, a: Value, c: Value| -> Value {
                    let o = match (which, int) {
                        (B::DAdd, true) => BinaryOp::Iadd,
                        (B::DAdd, false) => BinaryOp::Fadd,
                        (B::DSub, true) => BinaryOp::Isub,
                        (B::DSub, false) => BinaryOp::Fsub,
                        (_, true) => BinaryOp::Imul,
                        (_, false) => BinaryOp::Fmul,
                    };
                    l.b().binary(o, a, c)
                };
                let rx = self.is_replace(dx)?;
                let ry = self.is_replace(dy)?;
                let both = self.b().binary(BinaryOp::And, rx, ry);
                let kind = if int { GroupKind::Int } else { GroupKind::Real };
                let out = self.branch(
                    both,
                    &flat(&res),
                    &mut |l| {
                        let (a, c) = (l.replaced(dx, &t)?.word()?, l.replaced(dy, &t)?.word()?);
                        let v = op(l, b, a, c);
                        let r = l.mk_replace(&LVal::Word(v))?;
                        l.materialize(&r)
                    },
                    &mut |l| {
                        let g = l.group_record(kind, &[]);
                        if b == B::DMul {
                            l.need(x, site)?;
                            l.need(y, site)?;
                        }
                        let in_x = l.is_gchange_of_kind(dx, kind)?;
                        let a = l.group_delta(x, dx, g, in_x, &t, site)?.word()?;
                        let in_y = l.is_gchange_of_kind(dy, kind)?;
                        let c = l.group_delta(y, dy, g, in_y, &t, site)?.word()?;
                        let d = if b == B::DMul {
                            let (xv, yv) = (x.word()?, y.word()?);
                            let xb = op(l, B::DMul, xv, c);
                            let ay = op(l, B::DMul, a, yv);
                            let ab = op(l, B::DMul, a, c);
                            let s = op(l, B::DAdd, xb, ay);
                            op(l, B::DAdd, s, ab)
                        } else {
                            op(l, b, a, c)
                        };
                        let r = l.mk_gchange(g, &LVal::Word(d))?;
                        l.materialize(&r)
                    },
                )?;
                Self::from_slice(&res, &out)?
            }
            B::DNeg => {
                let t = p(0)?;
                let int = t == Type::Int;
                let (x, dx) = (&args[0], &args[1]);
                let rx = self.is_replace(dx)?;
                let kind = if int { GroupKind::Int } else { GroupKind::Real };
                // 0 - v, as the interpreter computes it (not a negation: -0.0 differs).
                let negate = |l: &mut Self, v: Value| -> Value {
                    if int {
                        let z = l.b().iconst(0);
                        l.b().binary(BinaryOp::Isub, z, v)
                    } else {
                        let z = l.b().fconst(0.0);
                        l.b().binary(BinaryOp::Fsub, z, v)
                    }
                };
                let out = self.branch(
                    rx,
                    &flat(&res),
                    &mut |l| {
                        let a = l.replaced(dx, &t)?.word()?;
                        let v = negate(l, a);
                        let r = l.mk_replace(&LVal::Word(v))?;
                        l.materialize(&r)
                    },
                    &mut |l| {
                        let g = l.group_record(kind, &[]);
                        let in_x = l.is_gchange_of_kind(dx, kind)?;
                        let a = l.group_delta(x, dx, g, in_x, &t, site)?.word()?;
                        let v = negate(l, a);
                        let r = l.mk_gchange(g, &LVal::Word(v))?;
                        l.materialize(&r)
                    },
                )?;
                Self::from_slice(&res, &out)?
            }
            // singleton is not a homomorphism: its change is the new element minus the old one.
            B::DSingleton => {
                let t = p(0)?;
                let (x, dx) = (&args[0], &args[1]);
                self.need(x, site)?;
                let x1 = self.oplus(&t, x, dx, site)?;
                let kw = flat(&t).len();
                let width = self.b().iconst(kw as i64);
                let bag = self.ext1("nabla_bag_new", vec![width])?;
                let same = self.eq_values(&t, &x1, x)?;
                self.branch(same, &[], &mut |_| Ok(vec![]), &mut |l| {
                    let k1 = l.key_record(&x1, kw)?;
                    let one = l.b().iconst(1);
                    l.bag_ext("nabla_bag_insert", vec![bag, k1, one], site)?;
                    let k0 = l.key_record(x, kw)?;
                    let minus = l.b().iconst(-1);
                    l.bag_ext("nabla_bag_insert", vec![bag, k0, minus], site)?;
                    Ok(vec![])
                })?;
                let g = self.group_record(GroupKind::Bag, &[]);
                self.mk_gchange(g, &LVal::Word(bag))?
            }
            // ILC Sec. 4.4: foldBag' G f zs dzs = GroupChange G (foldBag G f dzs) (dG, df nil).
            B::DFoldBag => {
                let gty = p(0)?;
                let out_ty = carrier(&gty);
                let bt = p(2)?;
                let base_ty = fun_ty(&[gty.clone(), p(1)?, bt.clone()], out_ty.clone());
                let (g, f, zs, dzs) = (args[0].word()?, args[1].clone(), &args[2], &args[3]);
                let in_bag = self.is_gchange_of_kind(dzs, GroupKind::Bag)?;
                let ok = self.group_change_ok(g, &out_ty)?;
                let fast_ok = self.b().binary(BinaryOp::And, in_bag, ok);
                self.three_paths(
                    &res,
                    &out_ty,
                    &bt,
                    zs,
                    dzs,
                    fast_ok,
                    site,
                    &mut |l| {
                        let (_, d) = l.gchanged(dzs, &bt)?;
                        let v = l.builtin(B::FoldBag, &base_ty, vec![LVal::Word(g), f.clone(), d], site)?;
                        l.group_change_at(g, &v, &out_ty)
                    },
                    &mut |l, c| l.builtin(B::FoldBag, &base_ty, vec![LVal::Word(g), f.clone(), c], site),
                )?
            }
            // mapBag f, filterBag p, flatMapBag f: bag-group homomorphisms for a fixed function.
            B::DMapBag | B::DFilterBag | B::DFlatMapBag => {
                let base = match b {
                    B::DMapBag => B::MapBag,
                    B::DFilterBag => B::FilterBag,
                    _ => B::FlatMapBag,
                };
                let bt = p(1)?;
                let out_ty = match &res {
                    Type::Delta(t) => (**t).clone(),
                    t => return Err(LowerError::internal(format!("`{}` returns {t}", b.name()))),
                };
                let base_ty = fun_ty(&[p(0)?, bt.clone()], out_ty.clone());
                let (f, bs, dbs) = (args[0].clone(), &args[1], &args[2]);
                let fast_ok = self.is_gchange_of_kind(dbs, GroupKind::Bag)?;
                self.three_paths(
                    &res,
                    &out_ty,
                    &bt,
                    bs,
                    dbs,
                    fast_ok,
                    site,
                    &mut |l| {
                        let (_, d) = l.gchanged(dbs, &bt)?;
                        let v = l.builtin(base, &base_ty, vec![f.clone(), d], site)?;
                        let g = l.group_record(GroupKind::Bag, &[]);
                        l.mk_gchange(g, &v)
                    },
                    &mut |l, c| l.builtin(base, &base_ty, vec![f.clone(), c], site),
                )?
            }
            // singletonMap k: from g to mapGroup g, for a fixed key.
            B::DSingletonMap => {
                let (kt, vt) = (p(0)?, p(1)?);
                let mt = Type::Map(kt.clone().into(), vt.clone().into());
                let (k, v, dv) = (&args[0], &args[1], &args[2]);
                let (kw, vw) = (flat(&kt).len(), flat(&vt).len());
                let single = |l: &mut Self, x: &LVal| -> R<LVal> {
                    let m = l.map_new(kw, vw)?;
                    let kr = l.key_record(k, kw)?;
                    let vr = l.key_record(x, vw)?;
                    l.ext("nabla_map_set", vec![m, kr, vr])?;
                    Ok(LVal::Word(m))
                };
                let fast_ok = self.all_gchanges(dv, &vt)?;
                let all_replace = self.all_replaces(dv, &vt)?;
                let words = flat(&res);
                let out = self.branch(
                    fast_ok,
                    &words,
                    &mut |l| {
                        let (g, d) = l.group_change_of(dv, &vt)?;
                        let mg = l.group_record(GroupKind::Map, &[g]);
                        let m = single(l, &d)?;
                        let r = l.mk_gchange(mg, &m)?;
                        l.materialize(&r)
                    },
                    &mut |l| {
                        l.branch(
                            all_replace,
                            &words,
                            &mut |l| {
                                let v1 = l.replacement_of(dv, &vt)?;
                                let m = single(l, &v1)?;
                                let r = l.mk_replace(&m)?;
                                l.materialize(&r)
                            },
                            &mut |l| {
                                l.need(v, site)?;
                                let v1 = l.oplus(&vt, v, dv, site)?;
                                let new = single(l, &v1)?;
                                let old = single(l, v)?;
                                let d = l.ominus(&mt, &new, &old, site)?;
                                l.materialize(&d)
                            },
                        )
                    },
                )?;
                Self::from_slice(&res, &out)?
            }
            // foldMap g1 g2 f: from mapGroup g1 to g2 (the user's promise), for a fixed f.
            B::DFoldMap => {
                let (g1t, g2t, ft, mt) = (p(0)?, p(1)?, p(2)?, p(3)?);
                let out_ty = carrier(&g2t);
                let vt = carrier(&g1t);
                let base_ty = fun_ty(&[g1t, g2t, ft, mt.clone()], out_ty.clone());
                let (g1, g2, f, m, dm) = (args[0].word()?, args[1].word()?, args[2].clone(), &args[3], &args[4]);
                let in_g = self.is_gchange_in_map_group(dm, g1, &vt)?;
                let ok = self.group_change_ok(g2, &out_ty)?;
                let fast_ok = self.b().binary(BinaryOp::And, in_g, ok);
                let call = |l: &mut Self, c: LVal| {
                    l.builtin(B::FoldMap, &base_ty, vec![LVal::Word(g1), LVal::Word(g2), f.clone(), c], site)
                };
                self.three_paths(
                    &res,
                    &out_ty,
                    &mt,
                    m,
                    dm,
                    fast_ok,
                    site,
                    &mut |l| {
                        let (_, d) = l.gchanged(dm, &mt)?;
                        let v = call(l, d)?;
                        l.group_change_at(g2, &v, &out_ty)
                    },
                    &mut |l, c| call(l, c),
                )?
            }
            // lookup g k: from mapGroup g to g, for a fixed key.
            B::DLookup => {
                let (gt, kt, mt) = (p(0)?, p(1)?, p(2)?);
                let vt = carrier(&gt);
                let base_ty = fun_ty(&[gt, kt, mt.clone()], vt.clone());
                let (g, k, m, dm) = (args[0].word()?, args[1].clone(), &args[2], &args[3]);
                let in_g = self.is_gchange_in_map_group(dm, g, &vt)?;
                let ok = self.group_change_ok(g, &vt)?;
                let fast_ok = self.b().binary(BinaryOp::And, in_g, ok);
                let call =
                    |l: &mut Self, c: LVal| l.builtin(B::Lookup, &base_ty, vec![LVal::Word(g), k.clone(), c], site);
                self.three_paths(
                    &res,
                    &vt,
                    &mt,
                    m,
                    dm,
                    fast_ok,
                    site,
                    &mut |l| {
                        let (_, d) = l.gchanged(dm, &mt)?;
                        let v = call(l, d)?;
                        l.group_change_at(g, &v, &vt)
                    },
                    &mut |l, c| call(l, c),
                )?
            }
            B::NoBase => {
                let t = self.no_base(ty)?;
                return Ok(t);
            }
            _ => return Err(LowerError::internal(format!("`{}` is not a derivative primitive", b.name()))),
        })
    }

    /// A record of `v`'s words for the runtime (null when there are none).
    fn key_record(&mut self, v: &LVal, words: usize) -> R<Value> {
        if words == 0 {
            Ok(self.b().null())
        } else {
            self.boxed(v)
        }
    }

    /// Is change `dv` of `t` one group change (a base type's `gchange`, pairs of them)?
    fn all_gchanges(&mut self, dv: &LVal, t: &Type) -> R<Value> {
        Ok(match t {
            Type::Tuple(ts) if ts.len() == 2 => {
                let ds = dv.components()?.to_vec();
                let a = self.all_gchanges(&ds[0], &ts[0])?;
                let b = self.all_gchanges(&ds[1], &ts[1])?;
                self.b().binary(BinaryOp::And, a, b)
            }
            Type::Tuple(_) | Type::Fun(..) | Type::Dual(_) => self.b().bconst(false),
            _ => {
                let (k, _) = Self::delta_parts(dv)?;
                let one = self.b().iconst(1);
                self.b().icmp(Cmp::Eq, k, one)
            }
        })
    }

    /// Does change `dv` of `t` replace the whole value?
    fn all_replaces(&mut self, dv: &LVal, t: &Type) -> R<Value> {
        Ok(match t {
            Type::Tuple(ts) => {
                let ds = dv.components()?.to_vec();
                let mut acc = self.b().bconst(true);
                for (t, d) in ts.iter().zip(&ds) {
                    let c = self.all_replaces(d, t)?;
                    acc = self.b().binary(BinaryOp::And, acc, c);
                }
                acc
            }
            Type::Fun(..) | Type::Dual(_) => self.b().bconst(false),
            _ => self.is_replace(dv)?,
        })
    }

    /// The group and element of a change where `all_gchanges` holds (pairs: a new pair group).
    fn group_change_of(&mut self, dv: &LVal, t: &Type) -> R<(Value, LVal)> {
        match t {
            Type::Tuple(ts) if ts.len() == 2 => {
                let ds = dv.components()?.to_vec();
                let (g1, d1) = self.group_change_of(&ds[0], &ts[0])?;
                let (g2, d2) = self.group_change_of(&ds[1], &ts[1])?;
                let g = self.group_record(GroupKind::Pair, &[g1, g2]);
                Ok((g, LVal::Tuple(vec![d1, d2])))
            }
            _ => self.gchanged(dv, t),
        }
    }

    /// The new value of a change where `all_replaces` holds.
    fn replacement_of(&mut self, dv: &LVal, t: &Type) -> R<LVal> {
        match t {
            Type::Tuple(ts) => {
                let ds = dv.components()?.to_vec();
                let mut out = Vec::new();
                for (t, d) in ts.iter().zip(&ds) {
                    out.push(self.replacement_of(d, t)?);
                }
                Ok(LVal::Tuple(out))
            }
            _ => self.replaced(dv, t),
        }
    }
}
