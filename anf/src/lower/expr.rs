//! Expressions: variables, literals, `let`, `if`, operators, tuples, indexing, literals of arrays,
//! bags and maps, and application spines.

use frontend::syntax::{BinOp, ExprKind, Lit, VarRef, E};
use frontend::types::Type;

use super::value::flat;
use super::{LVal, LowerError, Lowerer, Site, VarKey, R};
use crate::ir::{self, BinaryOp, Cmp, UnaryOp, Value};

/// Can evaluating `e` neither fail nor have an effect? Arguments like that may be evaluated before
/// an application that precedes them without changing which error comes first.
fn is_simple(e: &E) -> bool {
    match &e.kind {
        ExprKind::Var(..) | ExprKind::Lit(_) | ExprKind::Lam(..) => true,
        ExprKind::Tuple(xs) => xs.iter().all(is_simple),
        ExprKind::Ann(x, _) | ExprKind::Proj(x, _) => is_simple(x),
        _ => false,
    }
}

/// A literal or a local variable of type Real or Int, possibly bound first (`let t = 0.0 in t`, as
/// A-normal form writes a branch): a word, evaluated by reading it, with no effect.
fn scalar_atom(e: &E) -> bool {
    let plain = |x: &E| matches!(x.kind, ExprKind::Lit(_) | ExprKind::Var(_, VarRef::Local(_)));
    matches!(e.ty, Type::Real | Type::Int)
        && match &e.kind {
            ExprKind::Let(p, rhs, body) => {
                matches!(p.kind, frontend::syntax::PatKind::Var(..)) && plain(rhs) && scalar_atom(body)
            }
            _ => plain(e),
        }
}

impl Lowerer<'_> {
    /// Lowers `e` in the current function and block.
    pub(crate) fn expr(&mut self, e: &E) -> R<LVal> {
        match &e.kind {
            ExprKind::Var(n, VarRef::Local(id)) => self
                .env
                .get(&VarKey::Local(id.0))
                .cloned()
                .ok_or_else(|| LowerError::internal(format!("unbound variable `{n}`"))),
            ExprKind::Var(n, VarRef::Global(d)) => self
                .env
                .get(&VarKey::Global(d.0))
                .cloned()
                .ok_or_else(|| LowerError::internal(format!("`{n}` used before it is defined"))),
            ExprKind::Var(_, VarRef::Builtin(b)) => self.builtin_value(*b, &e.ty),
            ExprKind::Lit(l) => Ok(match l {
                Lit::Int(n) => LVal::Word(self.b().iconst(*n)),
                Lit::Real(x) => LVal::Word(self.b().fconst(*x)),
                Lit::Bool(b) => LVal::Word(self.b().bconst(*b)),
                Lit::Unit => LVal::Unit,
            }),
            ExprKind::Lam(..) => self.lambda(e, None),
            ExprKind::App(..) => self.app(e),
            ExprKind::Let(p, rhs, body) => {
                // Array fusion (`fuse`): a producer with one consumer is left unmade.
                if let frontend::syntax::PatKind::Var(_, id) = &p.kind {
                    if self.delayable(id.0, rhs, body) {
                        let lazy = self.delay(rhs)?;
                        self.lazy.insert(id.0, std::rc::Rc::new(lazy));
                        return self.expr(body);
                    }
                }
                let v = match self.fused(rhs)? {
                    Some(v) => v,
                    None => self.expr(rhs)?,
                };
                self.bind(p, v)?;
                self.expr(body)
            }
            // `if c then a else b` choosing between two scalar atoms (a derivative's `if x > y
            // then 0.0 else 1.0`): nothing to run in either branch, so a `select`, no branch.
            ExprKind::If(c, a, b) if scalar_atom(a) && scalar_atom(b) => {
                let cv = self.expr(c)?.word()?;
                let av = self.expr(a)?.word()?;
                let bv = self.expr(b)?.word()?;
                Ok(LVal::Word(self.b().select(cv, av, bv)))
            }
            ExprKind::If(c, a, b) => {
                let cv = self.expr(c)?.word()?;
                let words = self.branch(
                    cv,
                    &flat(&e.ty),
                    &mut |l| {
                        let v = l.expr(a)?;
                        l.materialize(&v)
                    },
                    &mut |l| {
                        let v = l.expr(b)?;
                        l.materialize(&v)
                    },
                )?;
                Self::from_slice(&e.ty, &words)
            }
            ExprKind::Bin(op, a, b) => self.binop(*op, a, b, e),
            ExprKind::Neg(a) => {
                let v = self.expr(a)?.word()?;
                let op = if a.ty == Type::Int { UnaryOp::Ineg } else { UnaryOp::Fneg };
                Ok(LVal::Word(self.b().unary(op, v)))
            }
            ExprKind::Not(a) => {
                let v = self.expr(a)?.word()?;
                Ok(LVal::Word(self.b().unary(UnaryOp::Not, v)))
            }
            ExprKind::Tuple(xs) => Ok(LVal::Tuple(xs.iter().map(|x| self.expr(x)).collect::<R<_>>()?)),
            ExprKind::Proj(a, i) => {
                let v = self.expr(a)?;
                v.components()?
                    .get(*i)
                    .cloned()
                    .ok_or_else(|| LowerError::internal(format!("projection .{} out of range", i + 1)))
            }
            ExprKind::Index(a, i) => {
                let av = self.expr(a)?.word()?;
                let iv = self.expr(i)?.word()?;
                let n = self.b().array_len(av);
                let site = self.site_value(Site::Span(e.span));
                self.b().bounds_check(iv, n, site);
                let stride = 8 * flat(&e.ty).len() as u32;
                let addr = self.b().elem_addr(av, iv, stride);
                self.load_value(&e.ty, addr, 0)
            }
            ExprKind::Array(xs) => {
                let vs: Vec<LVal> = xs.iter().map(|x| self.expr(x)).collect::<R<_>>()?;
                let elem = match &e.ty {
                    Type::Array(t) => (**t).clone(),
                    t => return Err(LowerError::internal(format!("array literal of type {t}"))),
                };
                let stride = 8 * flat(&elem).len() as u32;
                let n = self.b().iconst(vs.len() as i64);
                let arr = self.b().new_array(n, stride);
                for (i, v) in vs.iter().enumerate() {
                    let off = ir::ARRAY_HEADER as usize + i * stride as usize;
                    let off = i32::try_from(off).map_err(|_| LowerError::internal("array literal too large"))?;
                    self.store_value(v, arr, off)?;
                }
                Ok(LVal::Word(arr))
            }
            ExprKind::Bag(xs) => {
                let kw = match &e.ty {
                    Type::Bag(t) => flat(t).len(),
                    t => return Err(LowerError::internal(format!("bag literal of type {t}"))),
                };
                let w = self.b().iconst(kw as i64);
                let bag = self.ext1("nabla_bag_new", vec![w])?;
                let scratch = self.scratch(kw);
                for (x, n) in xs {
                    let v = self.expr(x)?;
                    self.store_value(&v, scratch, 0)?;
                    let m = self.b().iconst(*n);
                    self.bag_ext("nabla_bag_insert", vec![bag, scratch, m], Site::Span(e.span))?;
                }
                Ok(LVal::Word(bag))
            }
            ExprKind::Map(xs) => {
                let (kt, vt) = match &e.ty {
                    Type::Map(k, v) => ((**k).clone(), (**v).clone()),
                    t => return Err(LowerError::internal(format!("map literal of type {t}"))),
                };
                let (kw, vw) = (flat(&kt).len(), flat(&vt).len());
                let map = self.map_new(kw, vw)?;
                let (ks, vs) = (self.scratch(kw), self.scratch(vw));
                for (k, v) in xs {
                    // The interpreter checks each key as soon as the entry is evaluated.
                    let kv = self.expr(k)?;
                    let vv = self.expr(v)?;
                    self.store_value(&kv, ks, 0)?;
                    self.store_value(&vv, vs, 0)?;
                    let site = self.key_site(k.span, &kt);
                    self.ext("nabla_map_insert_unique", vec![map, ks, vs, site])?;
                }
                Ok(LVal::Word(map))
            }
            ExprKind::Ann(a, _) => self.expr(a),
            // Reverse mode never reaches lowering: `adjoint::reverse::transform` rewrites each
            // differentiation site into ordinary terms (or an `interp'` site) first.
            ExprKind::Pullback(..) | ExprKind::Dual(..) | ExprKind::Zero | ExprKind::Sum(..) => {
                Err(LowerError::internal("reverse mode reached lowering: run `adjoint::reverse::transform` first"))
            }
            ExprKind::Derive(..) => {
                Err(LowerError::internal("`derive` reached lowering: run `adjoint::incremental::expand` first"))
            }
        }
    }

    /// An arena record of `words` slots for passing keys and values to the runtime (null if none).
    pub(crate) fn scratch(&mut self, words: usize) -> Value {
        if words == 0 {
            self.b().null()
        } else {
            self.b().alloc(8 * words as u32)
        }
    }

    /// A new empty map with the given key and value widths.
    pub(crate) fn map_new(&mut self, kw: usize, vw: usize) -> R<Value> {
        let k = self.b().iconst(kw as i64);
        let v = self.b().iconst(vw as i64);
        self.ext1("nabla_map_new", vec![k, v])
    }

    /// An application spine `h a1 … an`, applied the way the interpreter does: the head, then each
    /// argument, applying as soon as an application could have an effect. Consecutive arguments that
    /// cannot fail are passed together, so known chains get their full applications.
    fn app(&mut self, e: &E) -> R<LVal> {
        let mut spine = Vec::new();
        let mut cur = e;
        while let ExprKind::App(f, a) = &cur.kind {
            spine.push((a, cur.span));
            cur = f;
        }
        spine.reverse();
        let mut f = self.expr(cur)?;
        let mut pending = Vec::new();
        for (i, (a, span)) in spine.iter().enumerate() {
            let v = self.expr(a)?;
            pending.push((v, Site::Span(*span)));
            // A known closure collects arguments symbolically and calls once saturated, which must
            // happen before the next argument is evaluated; an unknown one may wait for arguments
            // that cannot fail.
            let next_simple = spine.get(i + 1).is_some_and(|(b, _)| is_simple(b));
            let symbolic = matches!(f, LVal::Fun(super::Clo::Lam { .. } | super::Clo::Prim { .. }));
            if symbolic || !next_simple {
                f = self.apply(f, std::mem::take(&mut pending))?;
            }
        }
        Ok(f)
    }

    /// A binary operator.
    fn binop(&mut self, op: BinOp, a: &E, b: &E, e: &E) -> R<LVal> {
        if let BinOp::And | BinOp::Or = op {
            let av = self.expr(a)?.word()?;
            let words = self.branch(
                av,
                &[ir::Type::Bool],
                &mut |l| {
                    if op == BinOp::And {
                        Ok(vec![l.expr(b)?.word()?])
                    } else {
                        Ok(vec![l.b().bconst(true)])
                    }
                },
                &mut |l| {
                    if op == BinOp::And {
                        Ok(vec![l.b().bconst(false)])
                    } else {
                        Ok(vec![l.expr(b)?.word()?])
                    }
                },
            )?;
            return Ok(LVal::Word(words[0]));
        }
        let av = self.expr(a)?;
        let bv = self.expr(b)?;
        let site = Site::Span(e.span);
        match op {
            BinOp::Eq | BinOp::Ne => {
                let eq = self.eq_values(&a.ty, &av, &bv)?;
                Ok(LVal::Word(if op == BinOp::Eq { eq } else { self.b().unary(UnaryOp::Not, eq) }))
            }
            BinOp::Oplus => self.oplus(&a.ty, &av, &bv, site),
            BinOp::Ominus => self.ominus(&a.ty, &av, &bv, site),
            _ => {
                let (x, y) = (av.word()?, bv.word()?);
                let int = a.ty == Type::Int;
                let r = match op {
                    BinOp::Add => self.b().binary(if int { BinaryOp::Iadd } else { BinaryOp::Fadd }, x, y),
                    BinOp::Sub => self.b().binary(if int { BinaryOp::Isub } else { BinaryOp::Fsub }, x, y),
                    BinOp::Mul => self.b().binary(if int { BinaryOp::Imul } else { BinaryOp::Fmul }, x, y),
                    BinOp::Div if int => self.int_div(x, y, site)?,
                    BinOp::Div => self.b().binary(BinaryOp::Fdiv, x, y),
                    BinOp::Rem => self.int_rem(x, y, site)?,
                    BinOp::Pow => self.ext1("nabla_pow", vec![x, y])?,
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                        let c = match op {
                            BinOp::Lt => Cmp::Lt,
                            BinOp::Le => Cmp::Le,
                            BinOp::Gt => Cmp::Gt,
                            _ => Cmp::Ge,
                        };
                        if int {
                            self.b().icmp(c, x, y)
                        } else {
                            self.b().fcmp(c, x, y)
                        }
                    }
                    _ => return Err(LowerError::internal(format!("operator `{}`", op.ascii()))),
                };
                Ok(LVal::Word(r))
            }
        }
    }

    /// `x / y` on Int: division by zero is an error at `site`; `MIN / -1` wraps.
    pub(crate) fn int_div(&mut self, x: Value, y: Value, site: Site) -> R<Value> {
        let zero = self.b().iconst(0);
        let is_zero = self.b().icmp(Cmp::Eq, y, zero);
        self.fail_if(is_zero, ir::TrapCode::DivisionByZero, site, x, y);
        Ok(self.b().binary(BinaryOp::Sdiv, x, y))
    }

    /// Int `x % y`: division by zero is the same error as `/`'s.
    pub(crate) fn int_rem(&mut self, x: Value, y: Value, site: Site) -> R<Value> {
        let zero = self.b().iconst(0);
        let is_zero = self.b().icmp(Cmp::Eq, y, zero);
        self.fail_if(is_zero, ir::TrapCode::DivisionByZero, site, x, y);
        Ok(self.b().binary(BinaryOp::Srem, x, y))
    }

    /// Traps with `code` at `site` if `cond` holds; continues in a new block otherwise.
    pub(crate) fn fail_if(&mut self, cond: Value, code: ir::TrapCode, site: Site, a: Value, b: Value) {
        let (fail, _) = self.block(&[]);
        let (ok, _) = self.block(&[]);
        self.b().brif(cond, ir::BlockCall::new(fail, vec![]), ir::BlockCall::new(ok, vec![]));
        self.switch_to(fail);
        let s = self.site_value(site);
        self.b().trap(code, s, a, b);
        self.switch_to(ok);
    }
}
