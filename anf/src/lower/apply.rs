//! Closures: λ-chains and their body functions, tags and tag functions, application (direct when
//! the callee is known, a `switch` over the per-type tag set otherwise), and filling in the
//! switches once every tag exists.

use frontend::builtins::Builtin;
use frontend::types::Type;

use super::value::{after_args, arg_type, flat, fun_parts};
use super::{type_key, Body, ChainId, Clo, LVal, LowerError, Lowerer, Params, Shape, Site, VarKey, Work, R};
use crate::ir::{self, BlockCall, FuncId, Inst, Op, Signature, TagDecl, TagId, Value};

/// `fun x1 -> … -> fun xn -> body`: directly nested λs compiled together.
#[derive(Clone, Debug)]
pub(crate) struct Chain {
    pub params: Params,
    /// `tys[k]` is the closure type after `k` arguments: `A_k -> … -> A_(n-1) -> R`.
    pub tys: Vec<Type>,
    pub body: Body,
    /// Captured variables, with what is statically known of each and their types.
    pub fv: Vec<(VarKey, Shape, Type)>,
    pub name: String,
    /// The definition the chain is in (names the λs made inside it).
    pub def_name: String,
    pub body_fn: Option<FuncId>,
}

impl Chain {
    fn len(&self) -> usize {
        self.params.len()
    }
    pub(crate) fn arg(&self, k: usize) -> R<Type> {
        Ok(fun_parts(&self.tys[k])?.0.clone())
    }
    fn result(&self) -> R<Type> {
        after_args(&self.tys[0], self.len())
    }
}

/// What a tag stands for.
#[derive(Clone, Debug)]
pub(crate) enum TagKind {
    /// Step `k` (0-based) of a chain: `k` arguments collected.
    Chain(ChainId, usize),
    /// A builtin of this monomorphic type, partially applied to this many arguments.
    Prim(Type, usize),
}

#[derive(Clone, Debug)]
pub(crate) struct TagInfo {
    pub kind: TagKind,
    /// The closure type of the tag's values.
    pub ty: Type,
}

/// An argument of an application by `switch`, in run-time form.
#[derive(Clone, Debug)]
pub(crate) struct PArg {
    ty: Type,
    words: Vec<Value>,
    site: Site,
}

/// A `switch` whose cases are filled in when every tag is known.
pub(crate) struct Pending {
    func: FuncId,
    inst: Inst,
    tag: Value,
    ty: Type,
    env: Value,
    args: Vec<PArg>,
    join: ir::Block,
}

impl Lowerer<'_> {
    /// A λ term: makes its chain and captures the chain's free variables.
    pub(crate) fn lambda(&mut self, e: &frontend::syntax::E, name: Option<String>) -> R<LVal> {
        use frontend::syntax::ExprKind;
        let mut params = Vec::new();
        let mut tys = Vec::new();
        let mut cur = e;
        loop {
            match &cur.kind {
                ExprKind::Lam(p, b) => {
                    params.push(p.clone());
                    tys.push(cur.ty.clone());
                    cur = b;
                }
                ExprKind::Ann(x, _) if !params.is_empty() && matches!(x.kind, ExprKind::Lam(..)) => cur = x,
                _ => break,
            }
        }
        let mut fv = Vec::new();
        let mut words = Vec::new();
        for (key, ty) in super::scan::free_vars(e) {
            let v = self
                .env
                .get(&key)
                .cloned()
                .ok_or_else(|| LowerError::internal(format!("unbound variable {key:?} in a λ")))?;
            fv.push((key, self.shape_of(&v), ty));
            Self::dyn_words(&v, &mut words);
        }
        let env = if words.is_empty() { None } else { Some(self.record(&words)) };
        let name = name.unwrap_or_else(|| {
            let n = self.lam_counts.entry(self.def_name.clone()).or_insert(0);
            *n += 1;
            format!("{}.lam{n}", self.def_name)
        });
        let id = ChainId(self.chains.len() as u32);
        self.chains.push(Chain {
            params,
            tys,
            body: cur.clone(),
            fv,
            name,
            def_name: self.def_name.clone(),
            body_fn: None,
        });
        Ok(LVal::Fun(Clo::Lam { chain: id, env, args: Vec::new() }))
    }

    pub(crate) fn chain(&self, c: ChainId) -> &Chain {
        &self.chains[c.0 as usize]
    }

    /// The chain's body function `(env, x1…, xn…) -> result`, made on first use.
    pub(crate) fn body_fn(&mut self, c: ChainId) -> R<FuncId> {
        if let Some(f) = self.chain(c).body_fn {
            return Ok(f);
        }
        let ch = self.chain(c).clone();
        let mut params = vec![ir::Type::Ptr];
        for k in 0..ch.len() {
            params.extend(flat(&ch.arg(k)?));
        }
        let f = self.new_function(&ch.name, Signature::new(params, flat(&ch.result()?)));
        self.chains[c.0 as usize].body_fn = Some(f);
        self.work.push(Work::Body(c, f));
        Ok(f)
    }

    /// Records a new tag of closure type `ty`.
    fn add_tag(&mut self, kind: TagKind, ty: &Type, func: FuncId, env: Vec<ir::Type>) -> R<TagId> {
        let key = type_key(ty);
        if self.closed_types.contains(&key) {
            return Err(LowerError::internal(format!("a tag of type {ty} was made after its switches were filled")));
        }
        let tag = self.module.tags.push(TagDecl { func, env });
        self.tag_info.push(TagInfo { kind, ty: ty.clone() });
        self.tag_sets.entry(key).or_default().push(tag);
        Ok(tag)
    }

    /// The signature of a tag function of closure type `ty`: `(env, [site], arg…) -> result…`.
    fn tag_signature(&self, ty: &Type) -> R<Signature> {
        let (a, r) = fun_parts(ty)?;
        let mut params = vec![ir::Type::Ptr];
        if self.carries_site(ty) {
            params.push(ir::Type::I64);
        }
        params.extend(flat(a));
        Ok(Signature::new(params, flat(r)))
    }

    /// The tag of step `k` of chain `c` (made on first use, with its tag function).
    pub(crate) fn chain_tag(&mut self, c: ChainId, k: usize) -> R<TagId> {
        if let Some(t) = self.chain_tags.get(&(c, k)) {
            return Ok(*t);
        }
        let ch = self.chain(c).clone();
        let ty = ch.tys[k].clone();
        let env = if k == 0 {
            let mut tys = Vec::new();
            for (_, s, _) in &ch.fv {
                Self::shape_types(s, &mut tys);
            }
            tys
        } else {
            let mut tys = vec![ir::Type::Ptr];
            for i in 0..k {
                tys.extend(flat(&ch.arg(i)?));
            }
            tys
        };
        let func = if k == 0 && ch.len() == 1 && !self.carries_site(&ty) {
            // The body function has the tag function's signature: use it directly.
            self.body_fn(c)?
        } else {
            let f = self.new_function(&format!("{}.step{}", ch.name, k + 1), self.tag_signature(&ty)?);
            self.work.push(Work::ChainStep(c, k, f));
            f
        };
        let tag = self.add_tag(TagKind::Chain(c, k), &ty, func, env)?;
        self.chain_tags.insert((c, k), tag);
        Ok(tag)
    }

    /// The tag of builtin `b` at type `ty` holding `k` arguments (made on first use).
    pub(crate) fn prim_tag(&mut self, b: Builtin, ty: &Type, k: usize) -> R<TagId> {
        let key = (b, type_key(ty), k);
        if let Some(t) = self.prim_tags.get(&key) {
            return Ok(*t);
        }
        let cty = after_args(ty, k)?;
        let mut env = Vec::new();
        for i in 0..k {
            env.extend(flat(&arg_type(ty, i)?));
        }
        let f = self.new_function(&format!("{}.partial{k}", b.name()), self.tag_signature(&cty)?);
        self.work.push(Work::PrimStep(b, ty.clone(), k, f));
        let tag = self.add_tag(TagKind::Prim(ty.clone(), k), &cty, f, env)?;
        self.prim_tags.insert(key, tag);
        Ok(tag)
    }

    /// Applies `f` to `args` in order. Known closures are called directly (partial applications
    /// stay symbolic); others go through a `switch` over their type's tags.
    pub(crate) fn apply(&mut self, f: LVal, args: Vec<(LVal, Site)>) -> R<LVal> {
        if args.is_empty() {
            return Ok(f);
        }
        let LVal::Fun(clo) = f else { return Err(LowerError::internal(format!("applying a non-function {f:?}"))) };
        match clo {
            Clo::Prim { b, ty, args: mut have } => {
                let arity = b.arity();
                let mut it = args.into_iter();
                let mut site = Site::None;
                while have.len() < arity {
                    match it.next() {
                        Some((v, s)) => {
                            have.push(v);
                            site = s;
                        }
                        None => return Ok(LVal::Fun(Clo::Prim { b, ty, args: have })),
                    }
                }
                let r = self.builtin(b, &ty, have, site)?;
                self.apply(r, it.collect())
            }
            Clo::Lam { chain, env, args: mut have } => {
                let n = self.chain(chain).len();
                let mut it = args.into_iter();
                while have.len() < n {
                    match it.next() {
                        Some((v, _)) => have.push(v),
                        None => return Ok(LVal::Fun(Clo::Lam { chain, env, args: have })),
                    }
                }
                let f = self.body_fn(chain)?;
                let mut words = vec![self.env_value(env)];
                for a in &have {
                    words.extend(self.materialize(a)?);
                }
                let r = self.call(f, words);
                let rty = self.chain(chain).result()?;
                let v = Self::from_slice(&rty, &r)?;
                self.apply(v, it.collect())
            }
            Clo::Dyn { ty, tag, env } => self.apply_dyn(ty, tag, env, args),
        }
    }

    /// Applies a closure known only at run time: a `switch` on its tag, filled in later.
    fn apply_dyn(&mut self, ty: Type, tag: Value, env: Value, args: Vec<(LVal, Site)>) -> R<LVal> {
        let res_ty = after_args(&ty, args.len())?;
        let mut pargs = Vec::new();
        for (i, (v, site)) in args.iter().enumerate() {
            let words = self.materialize(v)?;
            pargs.push(PArg { ty: arg_type(&ty, i)?, words, site: *site });
        }
        let (join, jp) = self.block(&flat(&res_ty));
        let inst = self.b().inst(Op::Switch(tag, Vec::new()), &[]);
        self.pending.push(Pending { func: self.cur_func, inst, tag, ty, env, args: pargs, join });
        self.switch_to(join);
        Self::from_slice(&res_ty, &jp)
    }

    /// Fills in a switch: one case per tag of the closure type.
    pub(crate) fn patch(&mut self, p: Pending) -> R<()> {
        self.cur_func = p.func;
        self.env.clear();
        let key = type_key(&p.ty);
        self.closed_types.insert(key.clone());
        let tags = self.tag_sets.get(&key).cloned().unwrap_or_default();
        if tags.is_empty() {
            // No closure of this type is ever made, so this application never runs.
            let (u, _) = self.block(&[]);
            self.set_op(p.func, p.inst, Op::Jump(BlockCall::new(u, vec![])));
            self.switch_to(u);
            let site = self.b().iconst(ir::NO_SITE);
            let zero = self.b().iconst(0);
            self.b().trap(ir::TrapCode::Unreachable, site, zero, zero);
            return Ok(());
        }
        let mut cases = Vec::new();
        for t in tags {
            let (blk, _) = self.block(&[]);
            self.switch_to(blk);
            let r = self.apply_tag(t, p.env, &p.args)?;
            let words = self.materialize(&r)?;
            self.b().jump(p.join, words);
            cases.push((t, BlockCall::new(blk, vec![])));
        }
        self.set_op(p.func, p.inst, Op::Switch(p.tag, cases));
        Ok(())
    }

    /// The case of a switch for tag `t`: a full application of a chain calls its body function,
    /// anything else calls the tag function with the first argument and applies the result to the
    /// rest.
    fn apply_tag(&mut self, t: TagId, env: Value, args: &[PArg]) -> R<LVal> {
        let info = self.tag_info[t.as_u32() as usize].clone();
        let rest = |from: usize| -> R<Vec<(LVal, Site)>> {
            args[from..].iter().map(|a| Ok((Self::from_slice(&a.ty, &a.words)?, a.site))).collect()
        };
        if let super::apply::TagKind::Chain(c, 0) = info.kind {
            let n = self.chain(c).len();
            if args.len() >= n {
                let f = self.body_fn(c)?;
                let mut words = vec![env];
                for a in &args[..n] {
                    words.extend(a.words.iter().copied());
                }
                let r = self.call(f, words);
                let v = Self::from_slice(&self.chain(c).result()?, &r)?;
                let rest = rest(n)?;
                return self.apply(v, rest);
            }
        }
        let func = self.module.tags[t].func;
        let mut words = vec![env];
        if self.carries_site(&info.ty) {
            let s = self.site_value(args[0].site);
            words.push(s);
        }
        words.extend(args[0].words.iter().copied());
        let r = self.call(func, words);
        let v = Self::from_slice(&after_args(&info.ty, 1)?, &r)?;
        let rest = rest(1)?;
        self.apply(v, rest)
    }

    /// The parameters of a tag function after `env`: the site (if the type carries one) and the
    /// argument.
    fn tag_params(&self, ty: &Type) -> R<(Value, Site, LVal)> {
        let ps = self.params();
        let (site, from) = if self.carries_site(ty) { (Site::Dyn(ps[1]), 2) } else { (Site::None, 1) };
        let x = Self::from_slice(fun_parts(ty)?.0, &ps[from..])?;
        Ok((ps[0], site, x))
    }

    /// Step `k` of a chain: collect the argument; the last step calls the body function.
    pub(crate) fn gen_chain_step(&mut self, c: ChainId, k: usize, f: FuncId) -> R<()> {
        self.begin(f);
        let ch = self.chain(c).clone();
        let (env, site, x) = self.tag_params(&ch.tys[k])?;
        let (env1, mut prev) = if k == 0 {
            (Some(env), Vec::new())
        } else {
            let env1 = Some(self.b().load(ir::Type::Ptr, env, 0));
            let mut off = 8;
            let mut prev = Vec::new();
            for i in 0..k {
                let a = ch.arg(i)?;
                prev.push(self.load_value(&a, env, off)?);
                off += 8 * flat(&a).len() as i32;
            }
            (env1, prev)
        };
        prev.push(x);
        let v = LVal::Fun(Clo::Lam { chain: c, env: env1, args: Vec::new() });
        let r = self.apply(v, prev.into_iter().map(|a| (a, site)).collect())?;
        let words = self.materialize(&r)?;
        self.b().ret(words);
        Ok(())
    }

    /// A builtin's tag function: collect the argument; the last one runs the builtin.
    pub(crate) fn gen_prim_step(&mut self, b: Builtin, ty: &Type, k: usize, f: FuncId) -> R<()> {
        self.begin(f);
        let cty = after_args(ty, k)?;
        let (env, site, x) = self.tag_params(&cty)?;
        let mut args = Vec::new();
        let mut off = 0;
        for i in 0..k {
            let a = arg_type(ty, i)?;
            args.push(self.load_value(&a, env, off)?);
            off += 8 * flat(&a).len() as i32;
        }
        let v = LVal::Fun(Clo::Prim { b, ty: ty.clone(), args });
        let r = self.apply(v, vec![(x, site)])?;
        let words = self.materialize(&r)?;
        self.b().ret(words);
        Ok(())
    }

    /// A chain's body function: load the captured variables, bind the parameters, lower the body.
    pub(crate) fn gen_body(&mut self, c: ChainId, f: FuncId) -> R<()> {
        self.begin(f);
        let ch = self.chain(c).clone();
        self.def_name = ch.def_name.clone();
        let ps = self.params();
        let env1 = ps[0];
        let mut off = 0;
        for (key, shape, _) in &ch.fv {
            let mut tys = Vec::new();
            Self::shape_types(shape, &mut tys);
            let words = self.load_words(&tys, env1, off);
            off += 8 * tys.len() as i32;
            let v = Self::rebuild(shape, &mut words.into_iter())?;
            self.env.insert(*key, v);
        }
        let mut rest = ps[1..].iter().copied();
        for k in 0..ch.len() {
            let x = Self::from_words(&ch.arg(k)?, &mut rest)?;
            self.bind(&ch.params[k], x)?;
        }
        let r = self.expr(&ch.body)?;
        let words = self.materialize(&r)?;
        self.b().ret(words);
        Ok(())
    }
}
