//! Lowering: monomorphic core terms (or their A-normal let-series) → the first-order SSA IR.
//!
//! # Closure conversion and defunctionalisation
//! Every λ-*chain* `fun x1 -> … -> fun xn -> body` (directly nested λs) becomes one IR function,
//! its *body function* `(env, x1…, xn…) -> result`, where `env` is the record of the chain's free
//! variables (top-level definitions included: globals are captured like locals). A closure is a
//! tag (`i64`) plus an environment record (`ptr`). Tags are made lazily, only for closures that
//! escape (stored in memory, passed to or returned from a function, or joined at an `if`): step
//! `k` of a chain has a tag whose environment is `[env, x1…, x(k-1)…]`; a builtin applied to `k`
//! of its arguments has a tag whose environment holds those arguments.
//!
//! Application of a closure whose code is statically known — a `let`-bound or top-level λ, a
//! builtin, a partial application of either — is a direct call (a full application of a chain
//! calls its body function at once, with no intermediate closures). Any other application is a
//! `switch` over **every tag of the closure's monomorphic type** (per-type tag sets; after
//! monomorphisation a type names a closed set of λs and builtin partials, and tags are made only
//! for escaping closures, so the sets stay small). The switches are filled in when lowering is
//! complete and every tag is known. There is never an indirect call through a code pointer.
//!
//! # Values
//! Words follow `ir::layout`. Groups are records `[kind, …]` (see `groups`), changes `Delta t` a
//! kind and a payload record. Bags and maps are runtime collections (`ir::support`); folds over them
//! are IR loops over the sorted entry arrays the runtime returns, so they visit entries in the same
//! order as the interpreter.
//!
//! # Errors
//! Every failure the interpreter reports (index out of bounds, division by zero, `build`/`iterate`
//! arguments, array lengths, duplicate map keys) is a trap whose *site* operand indexes
//! [`Lowered::sites`], which gives the span the interpreter would report. Builtins that fail can be
//! applied through closures, where the failing span is the application's: closures of the types such
//! a builtin partial can have take the site as an extra `i64` parameter.
//!
//! Evaluation order is the interpreter's (call-by-value, left to right, one argument at a time), so
//! the first error is the same error.

mod apply;
mod builtins;
mod changes;
mod compact;
mod expr;
mod fuse;
mod groups;
mod scan;
mod value;

use std::fmt;
use std::rc::Rc;

use frontend::builtins::Builtin;
use frontend::syntax::{Pat, E};
use frontend::types::{Type, TypePrinter};
use frontend::Span;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::ir::{self, Block, Builder, FuncId, Function, Inst, Module, Signature, TagId, Value};
use crate::mono::MonoProgram;

use apply::{Chain, Pending, TagInfo};
use groups::Helper;
use value::{flat, Clo, LVal, Shape, Site, VarKey};

/// What to generate besides `@main`.
#[derive(Clone, Debug, Default)]
pub struct LowerOptions {
    /// Also generate `@apply(tag: i64, env: ptr, args…) -> result`, which applies a closure of the
    /// root definition's type to this many arguments (the root must be a function of at least as
    /// many curried arguments). This is how the public API calls a compiled definition.
    pub apply_arity: Option<usize>,
}

/// The lowered program.
#[derive(Clone, Debug)]
pub struct Lowered {
    pub module: Module,
    /// `@main() -> words of the root's type`: evaluates every definition in order (as the
    /// interpreter does) and returns the root's value.
    pub main: FuncId,
    /// `@apply` (see [`LowerOptions::apply_arity`]).
    pub apply: Option<FuncId>,
    /// Trap sites, indexed by the site operand of `trap` and `boundscheck`.
    pub sites: Vec<SiteInfo>,
    /// The root definition's type.
    pub root_ty: Type,
    /// The sites left to the interpreter (`interp' k args`), if any.
    pub interpreted: Option<std::rc::Rc<crate::mono::Interpreted>>,
}

/// Where a trap happened in the source.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteInfo {
    pub span: Span,
    /// For a map literal's key: the key's type (the runtime reports the key's words).
    pub key: Option<Type>,
}

/// Why lowering failed: a construct the compiler does not handle (the caller may fall back to the
/// interpreter), or an internal error.
#[derive(Clone, Debug, PartialEq)]
pub struct LowerError {
    pub span: Span,
    pub message: String,
    pub unsupported: bool,
}

impl LowerError {
    /// An inconsistency in the input or in lowering itself.
    pub(crate) fn internal(message: impl Into<String>) -> LowerError {
        LowerError { span: Span::SYNTHETIC, message: format!("internal: {}", message.into()), unsupported: false }
    }
    /// A construct the compiler does not handle yet.
    pub(crate) fn unsupported(span: Span, what: impl fmt::Display) -> LowerError {
        LowerError { span, message: format!("{what} is not compiled yet"), unsupported: true }
    }
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LowerError {}

pub(crate) type R<T> = Result<T, LowerError>;

/// Lowers a monomorphised program (whose definitions may be plain terms or A-normal let-series) into
/// an IR module. Run the verifier on the result in tests (`ir::verify`); the JIT verifies it too.
pub fn lower(mono: &MonoProgram, options: &LowerOptions) -> Result<Lowered, LowerError> {
    crate::mono::verify(mono).map_err(LowerError::internal)?;
    let normal = a_normal(mono);
    let mono = &normal;
    let root = mono.defs.last().ok_or_else(|| LowerError::internal("the program has no definitions"))?;
    let root_ty = root.ty.clone();
    let mut l = Lowerer::new(mono);
    l.uses = fuse::use_counts(mono);
    l.span_carrying = scan::span_carrying_types(mono);
    let main = l.lower_main()?;
    let apply = match options.apply_arity {
        Some(n) => Some(l.lower_apply_entry(&root_ty, n, root.body.span)?),
        None => None,
    };
    l.finish()?;
    Ok(Lowered { module: l.module, main, apply, sites: l.sites, root_ty, interpreted: mono.interpreted.clone() })
}

/// `mono` with every definition's body A-normalised (`anf::anormal`, the paper's let-series of
/// elementary terms): the form the compiler lowers, shared with the pullback semantics.
fn a_normal(mono: &MonoProgram) -> MonoProgram {
    let mut next = mono.next_local;
    let mut fresh = || frontend::syntax::fresh_local(&mut next);
    let defs = mono
        .defs
        .iter()
        .map(|d| crate::mono::MonoDef { body: crate::anormal::anormalise_def(&d.body, &mut fresh), ..d.clone() })
        .collect();
    MonoProgram { defs, next_local: next, interpreted: mono.interpreted.clone() }
}

/// A λ-chain's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ChainId(u32);

/// A function whose body is still to be generated.
enum Work {
    /// A chain's body function.
    Body(ChainId, FuncId),
    /// The tag function of step `k` (0-based) of a chain.
    ChainStep(ChainId, usize, FuncId),
    /// The tag function of a builtin at a type holding `k` arguments.
    PrimStep(Builtin, Type, usize, FuncId),
    /// A group, equality or copy helper at a type.
    Helper(Helper, Type, FuncId),
    /// `group.same` at a carrier type (see `changes`).
    SameGroup(Type, FuncId),
    /// The copier of closures of a type in one direction (see `compact`).
    Copier(Type, compact::Direction, FuncId),
}

/// The lowering state: the module under construction and everything known about closures.
pub(crate) struct Lowerer<'p> {
    mono: &'p MonoProgram,
    pub(crate) module: Module,
    cur_func: FuncId,
    cur_block: Block,
    /// The variables in scope in the function being lowered (binders are unique program-wide).
    env: FxHashMap<VarKey, LVal>,
    chains: Vec<Chain>,
    tag_info: Vec<TagInfo>,
    /// Tags by the printed closure type.
    tag_sets: FxHashMap<String, Vec<TagId>>,
    chain_tags: FxHashMap<(ChainId, usize), TagId>,
    prim_tags: FxHashMap<(Builtin, String, usize), TagId>,
    helpers: FxHashMap<(Helper, String), FuncId>,
    /// Group records of a known builtin kind, by the function and value that made them.
    known_groups: FxHashMap<(FuncId, Value), groups::GroupKind>,
    /// `mapGroup g` records made in a function with `g` a known builtin group: `g`'s kind.
    known_map_inner: FxHashMap<(FuncId, Value), groups::GroupKind>,
    work: Vec<Work>,
    pending: Vec<Pending>,
    /// Closure types whose switches have been filled in (no tag may be added to them any more).
    closed_types: FxHashSet<String>,
    sites: Vec<SiteInfo>,
    site_ids: FxHashMap<Span, i64>,
    /// Closure types whose tag functions take a site parameter.
    span_carrying: FxHashSet<String>,
    names: FxHashSet<String>,
    /// The definition being lowered (for naming λs), and how many λs each definition has so far.
    def_name: String,
    lam_counts: FxHashMap<String, usize>,
    /// The placeholder words made for `_` (ILC's eliminated base values), by function.
    no_base_words: FxHashSet<(FuncId, Value)>,
    /// `group.same` helpers by carrier type.
    same_group_fns: FxHashMap<String, FuncId>,
    /// How often each local variable occurs (`fuse::use_counts`).
    uses: FxHashMap<u32, u32>,
    /// Producers left unmade for their one consumer, by binder (`fuse`).
    lazy: FxHashMap<u32, Rc<fuse::Lazy>>,
    /// Compaction's closure copiers by closure type and direction (`compact`).
    copiers: FxHashMap<(String, compact::Direction), FuncId>,
    /// Their switches over the type's tags, filled in once every tag is known.
    pending_copies: Vec<compact::PendingCopy>,
}

/// The printed form of a type: the key of per-type tables.
pub(crate) fn type_key(t: &Type) -> String {
    TypePrinter::new().ty(t)
}

/// A type as part of an IR name (`Map Int (Bag Int)` → `Map_Int_'Bag_Int'`).
fn mangle(t: &Type) -> String {
    type_key(t)
        .replace("->", "to")
        .chars()
        .map(|c| match c {
            ' ' => '_',
            '(' | ')' => '\'',
            '*' => 'x',
            c if ir::parse::is_name_char(c) => c,
            _ => '_',
        })
        .collect()
}

impl<'p> Lowerer<'p> {
    fn new(mono: &'p MonoProgram) -> Lowerer<'p> {
        Lowerer {
            mono,
            module: Module::new(),
            cur_func: FuncId::from_u32(0),
            cur_block: Block::from_u32(0),
            env: FxHashMap::default(),
            chains: Vec::new(),
            tag_info: Vec::new(),
            tag_sets: FxHashMap::default(),
            chain_tags: FxHashMap::default(),
            prim_tags: FxHashMap::default(),
            helpers: FxHashMap::default(),
            known_groups: FxHashMap::default(),
            known_map_inner: FxHashMap::default(),
            work: Vec::new(),
            pending: Vec::new(),
            closed_types: FxHashSet::default(),
            sites: Vec::new(),
            site_ids: FxHashMap::default(),
            span_carrying: FxHashSet::default(),
            names: FxHashSet::default(),
            def_name: String::new(),
            lam_counts: FxHashMap::default(),
            no_base_words: FxHashSet::default(),
            same_group_fns: FxHashMap::default(),
            uses: FxHashMap::default(),
            lazy: FxHashMap::default(),
            copiers: FxHashMap::default(),
            pending_copies: Vec::new(),
        }
    }

    /// `@main`: every definition in order, then the root's words.
    fn lower_main(&mut self) -> R<FuncId> {
        let mono = self.mono;
        let root_ty = &mono.defs[mono.defs.len() - 1].ty;
        let main = self.new_function("main", Signature::new(vec![], flat(root_ty)));
        self.begin(main);
        let mut last = LVal::Unit;
        for (i, d) in mono.defs.iter().enumerate() {
            self.def_name = sanitize(&d.name);
            let v = if let frontend::syntax::ExprKind::Lam(..) = d.body.kind {
                let name = self.def_name.clone();
                self.lambda(&d.body, Some(name))?
            } else {
                self.expr(&d.body)?
            };
            self.env.insert(VarKey::Global(i as u32), v.clone());
            last = v;
        }
        let words = self.materialize(&last)?;
        self.b().ret(words);
        Ok(main)
    }

    /// `@apply(tag, env, args…)`: applies a closure of type `ty` to `n` arguments.
    fn lower_apply_entry(&mut self, ty: &Type, n: usize, span: Span) -> R<FuncId> {
        let mut params = vec![ir::Type::I64, ir::Type::Ptr];
        let mut arg_tys = Vec::new();
        for i in 0..n {
            let a = value::arg_type(ty, i)?;
            params.extend(flat(&a));
            arg_tys.push(a);
        }
        let result = value::after_args(ty, n)?;
        let f = self.new_function("apply", Signature::new(params, flat(&result)));
        self.begin(f);
        let ps = self.params();
        let clo = LVal::Fun(Clo::Dyn { ty: ty.clone(), tag: ps[0], env: ps[1] });
        let mut rest = ps[2..].iter().copied();
        let mut args = Vec::new();
        for a in &arg_tys {
            args.push((Self::from_words(a, &mut rest)?, Site::Span(span)));
        }
        let r = self.apply(clo, args)?;
        let words = self.materialize(&r)?;
        self.b().ret(words);
        Ok(f)
    }

    /// Generates every queued function, then fills in the switches; repeats until nothing is left.
    fn finish(&mut self) -> R<()> {
        loop {
            while let Some(w) = self.work.pop() {
                self.generate(w)?;
            }
            if !self.pending.is_empty() {
                for p in std::mem::take(&mut self.pending) {
                    self.patch(p)?;
                }
                continue;
            }
            // Closure copiers last: filling them in makes no tags, only more copiers.
            if self.pending_copies.is_empty() {
                return Ok(());
            }
            for p in std::mem::take(&mut self.pending_copies) {
                self.patch_copy(p)?;
            }
        }
    }

    /// Generates one queued function's body.
    fn generate(&mut self, w: Work) -> R<()> {
        match w {
            Work::Body(c, f) => self.gen_body(c, f),
            Work::ChainStep(c, k, f) => self.gen_chain_step(c, k, f),
            Work::PrimStep(b, ty, k, f) => self.gen_prim_step(b, &ty, k, f),
            Work::Helper(h, ty, f) => self.gen_helper(h, &ty, f),
            Work::SameGroup(ty, f) => self.gen_same_group(&ty, f),
            Work::Copier(ty, dir, f) => self.gen_copier(&ty, dir, f),
        }
    }

    // ---- Emission -------------------------------------------------------------------------

    /// A builder at the end of the current block.
    pub(crate) fn b(&mut self) -> Builder<'_> {
        let mut b = Builder::new(&mut self.module.funcs[self.cur_func]);
        b.switch_to(self.cur_block);
        b
    }

    /// The type of a value of the current function.
    pub(crate) fn vty(&self, v: Value) -> ir::Type {
        self.module.funcs[self.cur_func].value_type(v)
    }

    /// A new block with parameters (not yet entered).
    pub(crate) fn block(&mut self, params: &[ir::Type]) -> (Block, Vec<Value>) {
        self.b().create_block(params)
    }

    /// Continues emitting at the end of `block`, which moves to the end of the layout so the printed
    /// IR reads in the order it was generated.
    pub(crate) fn switch_to(&mut self, block: Block) {
        let f = &mut self.module.funcs[self.cur_func];
        if f.entry() != Some(block) {
            if let Some(i) = f.layout.iter().position(|b| *b == block) {
                f.layout.remove(i);
                f.layout.push(block);
            }
        }
        self.cur_block = block;
    }

    /// Starts generating function `f` at its entry, with no variables in scope.
    fn begin(&mut self, f: FuncId) {
        self.cur_func = f;
        self.cur_block = self.module.funcs[f].entry().unwrap_or(Block::from_u32(0));
        self.env.clear();
        self.lazy.clear();
    }

    /// The parameters of the current function.
    pub(crate) fn params(&self) -> Vec<Value> {
        let f = &self.module.funcs[self.cur_func];
        f.entry().map(|b| f.block_params(b).to_vec()).unwrap_or_default()
    }

    /// A new function with a unique name derived from `name`.
    pub(crate) fn new_function(&mut self, name: &str, sig: Signature) -> FuncId {
        let mut unique = name.to_string();
        let mut n = 1;
        while !self.names.insert(unique.clone()) {
            n += 1;
            unique = format!("{name}.{n}");
        }
        self.module.funcs.push(Function::new(&unique, sig))
    }

    /// Calls IR function `f`.
    pub(crate) fn call(&mut self, f: FuncId, args: Vec<Value>) -> Vec<Value> {
        let rets = self.module.funcs[f].sig.rets.clone();
        self.b().call(f, &rets, args)
    }

    /// Calls runtime support function `name` (declared on first use).
    pub(crate) fn ext(&mut self, name: &str, args: Vec<Value>) -> R<Vec<Value>> {
        let e = self
            .module
            .declare_support(name)
            .ok_or_else(|| LowerError::internal(format!("no support function `{name}`")))?;
        let sig = self.module.externs[e].sig.clone();
        Ok(self.b().call_ext(e, &sig, args))
    }

    /// Calls a bag support function that adds or scales multiplicities: `site` goes last, where
    /// it fails with `bag_overflow`.
    pub(crate) fn bag_ext(&mut self, name: &str, mut args: Vec<Value>, site: Site) -> R<Vec<Value>> {
        let s = self.site_value(site);
        args.push(s);
        self.ext(name, args)
    }

    /// [`Lowerer::bag_ext`] of a function that returns one word.
    pub(crate) fn bag_ext1(&mut self, name: &str, mut args: Vec<Value>, site: Site) -> R<Value> {
        let s = self.site_value(site);
        args.push(s);
        self.ext1(name, args)
    }

    /// Calls a support function that returns one word.
    pub(crate) fn ext1(&mut self, name: &str, args: Vec<Value>) -> R<Value> {
        self.ext(name, args)?.first().copied().ok_or_else(|| LowerError::internal(format!("`{name}` returns nothing")))
    }

    /// Replaces the operation of `inst` in function `f` (used to fill in switches).
    pub(crate) fn set_op(&mut self, f: FuncId, inst: Inst, op: ir::Op) {
        self.module.funcs[f].insts[inst].op = op;
    }

    /// The run-time number of a site.
    pub(crate) fn site_value(&mut self, s: Site) -> Value {
        match s {
            Site::None => self.b().iconst(ir::NO_SITE),
            Site::Dyn(v) => v,
            Site::Span(span) => {
                let id = match self.site_ids.get(&span) {
                    Some(id) => *id,
                    None => {
                        let id = self.sites.len() as i64;
                        self.sites.push(SiteInfo { span, key: None });
                        self.site_ids.insert(span, id);
                        id
                    }
                };
                self.b().iconst(id)
            }
        }
    }

    /// A site for a map literal's key of type `key`.
    pub(crate) fn key_site(&mut self, span: Span, key: &Type) -> Value {
        let id = self.sites.len() as i64;
        self.sites.push(SiteInfo { span, key: Some(key.clone()) });
        self.b().iconst(id)
    }

    /// Is `ty` a closure type whose tag functions take a site?
    pub(crate) fn carries_site(&self, ty: &Type) -> bool {
        self.span_carrying.contains(&type_key(ty))
    }

    /// Emits `for i in 0..n` carrying `init` around the loop; `body` gets `i` and the carried words
    /// and returns their next values. Gives the carried words at the exit.
    #[allow(clippy::type_complexity)]
    pub(crate) fn counted_loop(
        &mut self,
        n: Value,
        init: Vec<Value>,
        body: &mut dyn FnMut(&mut Self, Value, Vec<Value>) -> R<Vec<Value>>,
    ) -> R<Vec<Value>> {
        let tys: Vec<ir::Type> = init.iter().map(|v| self.vty(*v)).collect();
        let zero = self.b().iconst(0);
        let mut htys = vec![ir::Type::I64];
        htys.extend(&tys);
        let (header, hp) = self.block(&htys);
        let (body_block, _) = self.block(&[]);
        let (exit, ep) = self.block(&tys);
        let mut args = vec![zero];
        args.extend(init);
        self.b().jump(header, args);
        self.switch_to(header);
        let i = hp[0];
        let cond = self.b().icmp(ir::Cmp::Lt, i, n);
        self.b().brif(cond, ir::BlockCall::new(body_block, vec![]), ir::BlockCall::new(exit, hp[1..].to_vec()));
        self.switch_to(body_block);
        let next = body(self, i, hp[1..].to_vec())?;
        let one = self.b().iconst(1);
        let i1 = self.b().binary(ir::BinaryOp::Iadd, i, one);
        let mut args = vec![i1];
        args.extend(next);
        self.b().jump(header, args);
        self.switch_to(exit);
        Ok(ep)
    }

    /// A loop over the carried words `init` that runs `body` while `cond` (of the carried words)
    /// is true; gives the carried words at exit (`while`).
    pub(crate) fn while_loop(
        &mut self,
        init: Vec<Value>,
        cond: &mut dyn FnMut(&mut Self, Vec<Value>) -> R<Value>,
        body: &mut dyn FnMut(&mut Self, Vec<Value>) -> R<Vec<Value>>,
    ) -> R<Vec<Value>> {
        let tys: Vec<ir::Type> = init.iter().map(|v| self.vty(*v)).collect();
        let (header, hp) = self.block(&tys);
        let (body_block, _) = self.block(&[]);
        let (exit, ep) = self.block(&tys);
        self.b().jump(header, init);
        self.switch_to(header);
        let c = cond(self, hp.clone())?;
        self.b().brif(c, ir::BlockCall::new(body_block, vec![]), ir::BlockCall::new(exit, hp.clone()));
        self.switch_to(body_block);
        let next = body(self, hp)?;
        self.b().jump(header, next);
        self.switch_to(exit);
        Ok(ep)
    }

    /// `if c { then } else { els }`, each branch giving words of types `tys`; gives the joined words.
    pub(crate) fn branch(
        &mut self,
        c: Value,
        tys: &[ir::Type],
        then: &mut dyn FnMut(&mut Self) -> R<Vec<Value>>,
        els: &mut dyn FnMut(&mut Self) -> R<Vec<Value>>,
    ) -> R<Vec<Value>> {
        let (tb, _) = self.block(&[]);
        let (eb, _) = self.block(&[]);
        let (join, jp) = self.block(tys);
        self.b().brif(c, ir::BlockCall::new(tb, vec![]), ir::BlockCall::new(eb, vec![]));
        self.switch_to(tb);
        let a = then(self)?;
        self.b().jump(join, a);
        self.switch_to(eb);
        let b = els(self)?;
        self.b().jump(join, b);
        self.switch_to(join);
        Ok(jp)
    }

    /// Binds a pattern to a value.
    pub(crate) fn bind(&mut self, p: &Pat, v: LVal) -> R<()> {
        use frontend::syntax::PatKind;
        match &p.kind {
            PatKind::Var(_, id) => {
                self.env.insert(VarKey::Local(id.0), v);
            }
            PatKind::Wild | PatKind::Unit => {}
            PatKind::Tuple(ps) => {
                let vs = v.components()?.to_vec();
                for (q, x) in ps.iter().zip(vs) {
                    self.bind(q, x)?;
                }
            }
        }
        Ok(())
    }
}

/// A definition's name as part of an IR name.
fn sanitize(name: &str) -> String {
    let s: String = name.chars().map(|c| if ir::parse::is_name_char(c) { c } else { '_' }).collect();
    if s.is_empty() {
        "def".into()
    } else {
        s
    }
}

/// The chain's λ patterns (kept for `Chain`).
pub(crate) type Params = Vec<Rc<Pat>>;

/// The body of a chain.
pub(crate) type Body = E;
