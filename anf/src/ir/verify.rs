//! The IR verifier: structure, SSA dominance, operand and result types, branch arities, closure-tag
//! consistency of switches and tags, and calls against signatures. Errors are data.

use std::fmt;

use rustc_hash::FxHashSet;

use super::builder::binary_result;
use super::cfg::Dominators;
use super::entity::SecondaryMap;
use super::parse::is_name_char;
use super::print::{inst_text, sig_text};
use super::{
    BinaryOp, Block, BlockCall, Cmp, Function, Inst, Module, Op, Signature, TagId, Type, UnaryOp, Value, ValueDef,
};

/// One verifier finding, located by function, block and instruction where they apply.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyError {
    pub func: Option<String>,
    pub block: Option<Block>,
    pub inst: Option<Inst>,
    /// The instruction as text, for the message.
    pub inst_text: Option<String>,
    pub kind: VerifyErrorKind,
}

/// What is wrong.
#[derive(Clone, Debug, PartialEq)]
pub enum VerifyErrorKind {
    DuplicateFunction(String),
    DuplicateExtern(String),
    /// A name the text format cannot spell.
    InvalidName(String),
    /// Support functions return at most one value (the C ABI).
    ExternReturnsTooMany(String),
    TagUnknownFunction(TagId),
    /// A tag's function must take the environment pointer first.
    TagFunctionSignature(TagId),
    /// A load from the environment that does not match the tag's environment layout.
    EnvFieldAccess {
        tag: TagId,
        offset: i32,
        ty: Type,
    },
    NoEntryBlock,
    EntryParams {
        expected: Vec<Type>,
        found: Vec<Type>,
    },
    BlockListedTwice(Block),
    InstListedTwice(Inst),
    MissingTerminator,
    TerminatorNotLast,
    /// A branch to a block that is not in the layout.
    UnknownBlock(Block),
    BranchToEntry,
    /// A value that does not exist or whose definition is not where it claims.
    InvalidValue(Value),
    /// A use not dominated by the value's definition.
    NotDominated(Value),
    OperandType {
        index: usize,
        expected: &'static str,
        found: Type,
    },
    /// The operands of `select` or a comparison must have one type.
    OperandsDiffer,
    ResultCount {
        expected: usize,
        found: usize,
    },
    ResultType {
        index: usize,
        expected: Type,
        found: Type,
    },
    BranchArity {
        block: Block,
        expected: usize,
        found: usize,
    },
    BranchArgType {
        block: Block,
        index: usize,
        expected: Type,
        found: Type,
    },
    ReturnArity {
        expected: usize,
        found: usize,
    },
    ReturnType {
        index: usize,
        expected: Type,
        found: Type,
    },
    UnknownFunction(String),
    UnknownExtern(String),
    UnknownTag(TagId),
    CallArity {
        callee: String,
        expected: usize,
        found: usize,
    },
    CallArgType {
        callee: String,
        index: usize,
        expected: Type,
        found: Type,
    },
    EmptySwitch,
    DuplicateCase(TagId),
    /// Every case of a switch must be a tag of the same closure signature.
    CaseSignature {
        tag: TagId,
        expected: Signature,
        found: Signature,
    },
    /// `bool` and `ptr` compare only for (in)equality.
    OrderedCompare(Type),
}

impl fmt::Display for VerifyErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use VerifyErrorKind::*;
        let types = |ts: &[Type]| ts.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ");
        match self {
            DuplicateFunction(n) => write!(f, "function `@{n}` is defined twice"),
            DuplicateExtern(n) => write!(f, "extern `${n}` is declared twice"),
            InvalidName(n) => write!(f, "`{n}` is not a valid name"),
            ExternReturnsTooMany(n) => write!(f, "extern `${n}` returns more than one value"),
            TagUnknownFunction(t) => write!(f, "tag {t} names a function that does not exist"),
            TagFunctionSignature(t) => write!(f, "tag {t}'s function does not take the environment `ptr` first"),
            EnvFieldAccess { tag, offset, ty } => {
                write!(f, "load.{ty} at offset {offset} does not match the environment of tag {tag}")
            }
            NoEntryBlock => write!(f, "function has no blocks"),
            EntryParams { expected, found } => {
                write!(f, "entry block parameters ({}) do not match the signature ({})", types(found), types(expected))
            }
            BlockListedTwice(b) => write!(f, "block {b} appears twice in the layout"),
            InstListedTwice(i) => write!(f, "instruction {i} appears twice in the layout"),
            MissingTerminator => write!(f, "block does not end with a terminator"),
            TerminatorNotLast => write!(f, "terminator in the middle of a block"),
            UnknownBlock(b) => write!(f, "branch to block {b}, which is not in the function"),
            BranchToEntry => write!(f, "branch to the entry block"),
            InvalidValue(v) => write!(f, "value {v} is not defined"),
            NotDominated(v) => write!(f, "use of {v} is not dominated by its definition"),
            OperandType { index, expected, found } => {
                write!(f, "operand {} has type {found}, expected {expected}", index + 1)
            }
            OperandsDiffer => write!(f, "operands have different types"),
            ResultCount { expected, found } => write!(f, "defines {found} result(s), expected {expected}"),
            ResultType { index, expected, found } => {
                write!(f, "result {} has type {found}, expected {expected}", index + 1)
            }
            BranchArity { block, expected, found } => {
                write!(f, "branch to {block} passes {found} argument(s), it takes {expected}")
            }
            BranchArgType { block, index, expected, found } => {
                write!(f, "branch to {block}: argument {} has type {found}, parameter has type {expected}", index + 1)
            }
            ReturnArity { expected, found } => write!(f, "returns {found} value(s), signature has {expected}"),
            ReturnType { index, expected, found } => {
                write!(f, "return value {} has type {found}, signature says {expected}", index + 1)
            }
            UnknownFunction(n) => write!(f, "call of unknown function {n}"),
            UnknownExtern(n) => write!(f, "call of undeclared extern {n}"),
            UnknownTag(t) => write!(f, "unknown tag {t}"),
            CallArity { callee, expected, found } => {
                write!(f, "call of {callee} passes {found} argument(s), it takes {expected}")
            }
            CallArgType { callee, index, expected, found } => {
                write!(f, "call of {callee}: argument {} has type {found}, expected {expected}", index + 1)
            }
            EmptySwitch => write!(f, "switch without cases"),
            DuplicateCase(t) => write!(f, "switch has two cases for tag {t}"),
            CaseSignature { tag, expected, found } => write!(
                f,
                "tag {tag} has closure signature {}, other cases have {}",
                sig_text(found),
                sig_text(expected)
            ),
            OrderedCompare(t) => write!(f, "ordered comparison of {t} values"),
        }
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(func) = &self.func {
            write!(f, "in @{func}")?;
            if let Some(b) = self.block {
                write!(f, ", {b}")?;
            }
            if let Some(t) = &self.inst_text {
                write!(f, ", `{t}`")?;
            }
            write!(f, ": ")?;
        }
        write!(f, "{}", self.kind)
    }
}

impl std::error::Error for VerifyError {}

/// Checks the whole module; returns every error found.
pub fn verify(module: &Module) -> Result<(), Vec<VerifyError>> {
    let mut errs = Vec::new();
    check_module_items(module, &mut errs);
    for f in module.funcs.values() {
        FuncVerifier::new(module, f, &mut errs).run();
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs)
    }
}

/// Names, extern signatures and tag declarations.
fn check_module_items(module: &Module, errs: &mut Vec<VerifyError>) {
    let err = |kind| VerifyError { func: None, block: None, inst: None, inst_text: None, kind };
    let valid = |n: &str| !n.is_empty() && n.chars().all(is_name_char);
    let mut seen = FxHashSet::default();
    for f in module.funcs.values() {
        if !valid(&f.name) {
            errs.push(err(VerifyErrorKind::InvalidName(f.name.clone())));
        }
        if !seen.insert(f.name.as_str()) {
            errs.push(err(VerifyErrorKind::DuplicateFunction(f.name.clone())));
        }
    }
    let mut seen = FxHashSet::default();
    for e in module.externs.values() {
        if !valid(&e.name) {
            errs.push(err(VerifyErrorKind::InvalidName(e.name.clone())));
        }
        if !seen.insert(e.name.as_str()) {
            errs.push(err(VerifyErrorKind::DuplicateExtern(e.name.clone())));
        }
        if e.sig.rets.len() > 1 {
            errs.push(err(VerifyErrorKind::ExternReturnsTooMany(e.name.clone())));
        }
    }
    for (tag, decl) in module.tags.iter() {
        let Some(f) = module.funcs.get(decl.func) else {
            errs.push(err(VerifyErrorKind::TagUnknownFunction(tag)));
            continue;
        };
        if f.sig.params.first() != Some(&Type::Ptr) {
            errs.push(err(VerifyErrorKind::TagFunctionSignature(tag)));
            continue;
        }
        // Loads through the environment parameter must follow the tag's layout.
        let Some(env) = f.entry().and_then(|b| f.blocks[b].params.first().copied()) else { continue };
        for &b in &f.layout {
            for &inst in &f.blocks[b].insts {
                if let Op::Load(ty, p, offset) = f.insts[inst].op {
                    let field = usize::try_from(offset / 8).ok().filter(|_| offset % 8 == 0);
                    let ok = field.and_then(|i| decl.env.get(i)) == Some(&ty);
                    if p == env && !ok {
                        errs.push(VerifyError {
                            func: Some(f.name.clone()),
                            block: Some(b),
                            inst: Some(inst),
                            inst_text: Some(inst_text(module, f, inst)),
                            kind: VerifyErrorKind::EnvFieldAccess { tag, offset, ty },
                        });
                    }
                }
            }
        }
    }
}

/// Where an instruction sits in the layout.
#[derive(Clone, Copy, Debug, Default)]
struct Pos {
    block: Option<Block>,
    index: usize,
}

struct FuncVerifier<'a> {
    module: &'a Module,
    func: &'a Function,
    errs: &'a mut Vec<VerifyError>,
    inst_pos: SecondaryMap<Inst, Pos>,
    in_layout: SecondaryMap<Block, bool>,
    doms: Dominators,
    /// The instruction being checked, for error locations.
    cur: Option<(Block, Inst)>,
}

impl<'a> FuncVerifier<'a> {
    /// A verifier for `func` reporting into `errs`.
    fn new(module: &'a Module, func: &'a Function, errs: &'a mut Vec<VerifyError>) -> FuncVerifier<'a> {
        FuncVerifier {
            module,
            func,
            errs,
            inst_pos: SecondaryMap::new(),
            in_layout: SecondaryMap::new(),
            doms: Dominators::compute(func),
            cur: None,
        }
    }

    /// Reports an error at the current instruction.
    fn report(&mut self, kind: VerifyErrorKind) {
        let (block, inst) = match self.cur {
            Some((b, i)) => (Some(b), Some(i)),
            None => (None, None),
        };
        let inst_text = inst.map(|i| inst_text(self.module, self.func, i));
        self.errs.push(VerifyError { func: Some(self.func.name.clone()), block, inst, inst_text, kind });
    }

    /// Reports an error about block `b` as a whole.
    fn report_block(&mut self, b: Block, kind: VerifyErrorKind) {
        self.errs.push(VerifyError {
            func: Some(self.func.name.clone()),
            block: Some(b),
            inst: None,
            inst_text: None,
            kind,
        });
    }

    /// Checks the whole function.
    fn run(&mut self) {
        let f = self.func;
        let Some(entry) = f.entry() else {
            self.report(VerifyErrorKind::NoEntryBlock);
            return;
        };
        let Some(entry_data) = f.blocks.get(entry) else {
            self.report_block(entry, VerifyErrorKind::BlockListedTwice(entry));
            return;
        };
        let entry_types: Vec<Type> = entry_data.params.iter().map(|v| self.value_type(*v)).collect();
        if entry_types != f.sig.params {
            self.report_block(
                entry,
                VerifyErrorKind::EntryParams { expected: f.sig.params.clone(), found: entry_types },
            );
        }
        if !self.check_layout() {
            return;
        }
        for &b in &f.layout {
            let n = f.blocks[b].insts.len();
            if n == 0 || !f.insts[f.blocks[b].insts[n - 1]].op.is_terminator() {
                self.report_block(b, VerifyErrorKind::MissingTerminator);
            }
            for (i, &inst) in f.blocks[b].insts.iter().enumerate() {
                self.cur = Some((b, inst));
                if i + 1 < n && f.insts[inst].op.is_terminator() {
                    self.report(VerifyErrorKind::TerminatorNotLast);
                }
                self.check_inst(b, i, inst);
            }
            self.cur = None;
        }
    }

    /// Blocks and instructions appear once; definitions agree with positions. False if unusable.
    fn check_layout(&mut self) -> bool {
        let f = self.func;
        let mut ok = true;
        let mut inst_seen: SecondaryMap<Inst, bool> = SecondaryMap::new();
        for &b in &f.layout {
            if !f.blocks.is_valid(b) || self.in_layout[b] {
                self.report_block(b, VerifyErrorKind::BlockListedTwice(b));
                ok = false;
                continue;
            }
            self.in_layout[b] = true;
            for (i, &inst) in f.blocks[b].insts.iter().enumerate() {
                if !f.insts.is_valid(inst) || inst_seen[inst] {
                    self.report_block(b, VerifyErrorKind::InstListedTwice(inst));
                    ok = false;
                    continue;
                }
                inst_seen[inst] = true;
                self.inst_pos[inst] = Pos { block: Some(b), index: i };
            }
        }
        ok
    }

    /// The type of `v`, or `i64` for a value that does not exist (reported elsewhere).
    fn value_type(&self, v: Value) -> Type {
        self.func.values.get(v).map_or(Type::I64, |d| d.ty)
    }

    /// Is `v` a defined value whose definition is where it says?
    fn value_is_defined(&self, v: Value) -> bool {
        let f = self.func;
        let Some(data) = f.values.get(v) else { return false };
        match data.def {
            ValueDef::Param(b, n) => self.in_layout[b] && f.blocks[b].params.get(n as usize) == Some(&v),
            ValueDef::Result(inst, n) => {
                self.inst_pos[inst].block.is_some() && f.insts[inst].results.get(n as usize) == Some(&v)
            }
            ValueDef::Unused => false,
        }
    }

    /// A use of `v` by the instruction at `index` in `block`: defined and dominating.
    fn check_use(&mut self, block: Block, index: usize, v: Value) -> bool {
        if !self.value_is_defined(v) {
            self.report(VerifyErrorKind::InvalidValue(v));
            return false;
        }
        if !self.doms.is_reachable(block) {
            return true;
        }
        let dominated = match self.func.values[v].def {
            ValueDef::Param(b, _) => self.doms.dominates(b, block),
            ValueDef::Result(inst, _) => {
                let pos = self.inst_pos[inst];
                let def_block = pos.block.unwrap_or(block);
                if def_block == block {
                    pos.index < index
                } else {
                    self.doms.dominates(def_block, block)
                }
            }
            ValueDef::Unused => false,
        };
        if !dominated {
            self.report(VerifyErrorKind::NotDominated(v));
        }
        dominated
    }

    /// Operand `index` must have one of the `allowed` types.
    fn expect_operand(&mut self, index: usize, v: Value, allowed: &[Type], expected: &'static str) {
        let t = self.value_type(v);
        if !allowed.contains(&t) {
            self.report(VerifyErrorKind::OperandType { index, expected, found: t });
        }
    }

    /// Operands defined and dominating, operand and result types of one instruction.
    fn check_inst(&mut self, block: Block, index: usize, inst: Inst) {
        let f = self.func;
        let data = &f.insts[inst];
        let mut all_defined = true;
        for v in data.op.operands() {
            all_defined &= self.check_use(block, index, v);
        }
        for (i, &r) in data.results.iter().enumerate() {
            let def_ok = f.values.get(r).is_some_and(|d| d.def == ValueDef::Result(inst, i as u32));
            if !def_ok {
                self.report(VerifyErrorKind::InvalidValue(r));
                return;
            }
        }
        if !all_defined {
            return;
        }
        use Type::*;
        const I: &[Type] = &[I64];
        const F: &[Type] = &[F64];
        const B: &[Type] = &[Bool];
        const P: &[Type] = &[Ptr];
        let expected_results: Option<Vec<Type>> = match &data.op {
            Op::Iconst(_) | Op::TagConst(_) => {
                if let Op::TagConst(t) = data.op {
                    if !self.module.tags.is_valid(t) {
                        self.report(VerifyErrorKind::UnknownTag(t));
                    }
                }
                Some(vec![I64])
            }
            Op::Fconst(_) => Some(vec![F64]),
            Op::Bconst(_) => Some(vec![Bool]),
            Op::Null | Op::Alloc(_) => Some(vec![Ptr]),
            Op::Unary(u, a) => {
                let (arg, res, name): (&[Type], Type, &'static str) = match u {
                    UnaryOp::Ineg => (I, I64, "i64"),
                    UnaryOp::Fneg | UnaryOp::Fabs | UnaryOp::Fsqrt => (F, F64, "f64"),
                    UnaryOp::Not => (B, Bool, "bool"),
                    UnaryOp::Itof => (I, F64, "i64"),
                    UnaryOp::Btoi => (B, I64, "bool"),
                };
                self.expect_operand(0, *a, arg, name);
                Some(vec![res])
            }
            Op::Binary(b, x, y) => {
                let (arg, name): (&[Type], &'static str) = match b {
                    BinaryOp::Iadd | BinaryOp::Isub | BinaryOp::Imul | BinaryOp::Sdiv | BinaryOp::Srem => (I, "i64"),
                    BinaryOp::Fadd | BinaryOp::Fsub | BinaryOp::Fmul | BinaryOp::Fdiv => (F, "f64"),
                    BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => (B, "bool"),
                };
                self.expect_operand(0, *x, arg, name);
                self.expect_operand(1, *y, arg, name);
                Some(vec![binary_result(*b)])
            }
            Op::Icmp(c, x, y) => {
                self.expect_operand(0, *x, &[I64, Bool, Ptr], "i64, bool or ptr");
                let (tx, ty) = (self.value_type(*x), self.value_type(*y));
                if tx != ty {
                    self.report(VerifyErrorKind::OperandsDiffer);
                } else if tx != I64 && !matches!(c, Cmp::Eq | Cmp::Ne) {
                    self.report(VerifyErrorKind::OrderedCompare(tx));
                }
                Some(vec![Bool])
            }
            Op::Fcmp(_, x, y) => {
                self.expect_operand(0, *x, F, "f64");
                self.expect_operand(1, *y, F, "f64");
                Some(vec![Bool])
            }
            Op::Select(c, x, y) => {
                self.expect_operand(0, *c, B, "bool");
                let (tx, ty) = (self.value_type(*x), self.value_type(*y));
                if tx != ty {
                    self.report(VerifyErrorKind::OperandsDiffer);
                }
                Some(vec![tx])
            }
            Op::Load(t, p, _) => {
                self.expect_operand(0, *p, P, "ptr");
                Some(vec![*t])
            }
            Op::Store(_, p, _) => {
                self.expect_operand(1, *p, P, "ptr");
                Some(vec![])
            }
            Op::NewArray(n, _) => {
                self.expect_operand(0, *n, I, "i64");
                Some(vec![Ptr])
            }
            Op::ArrayLen(a) => {
                self.expect_operand(0, *a, P, "ptr");
                Some(vec![I64])
            }
            Op::ElemAddr(a, i, _) => {
                self.expect_operand(0, *a, P, "ptr");
                self.expect_operand(1, *i, I, "i64");
                Some(vec![Ptr])
            }
            Op::BoundsCheck(i, n, site) => {
                self.expect_operand(0, *i, I, "i64");
                self.expect_operand(1, *n, I, "i64");
                self.expect_operand(2, *site, I, "i64");
                Some(vec![])
            }
            Op::Trap(_, site, a, b) => {
                self.expect_operand(0, *site, I, "i64");
                self.expect_operand(1, *a, I, "i64");
                self.expect_operand(2, *b, I, "i64");
                Some(vec![])
            }
            Op::Call(callee, args) => match self.module.funcs.get(*callee) {
                Some(g) => {
                    self.check_args(&format!("@{}", g.name), &g.sig.params, args);
                    Some(g.sig.rets.clone())
                }
                None => {
                    self.report(VerifyErrorKind::UnknownFunction(callee.to_string()));
                    None
                }
            },
            Op::CallExt(callee, args) => match self.module.externs.get(*callee) {
                Some(e) => {
                    self.check_args(&format!("${}", e.name), &e.sig.params, args);
                    Some(e.sig.rets.clone())
                }
                None => {
                    self.report(VerifyErrorKind::UnknownExtern(callee.to_string()));
                    None
                }
            },
            Op::Jump(bc) => {
                self.check_block_call(bc);
                Some(vec![])
            }
            Op::Brif(c, t, e) => {
                self.expect_operand(0, *c, B, "bool");
                self.check_block_call(t);
                self.check_block_call(e);
                Some(vec![])
            }
            Op::Switch(v, cases) => {
                self.expect_operand(0, *v, I, "i64");
                self.check_switch(cases);
                Some(vec![])
            }
            Op::Return(vs) => {
                let rets = &f.sig.rets;
                if vs.len() != rets.len() {
                    self.report(VerifyErrorKind::ReturnArity { expected: rets.len(), found: vs.len() });
                } else {
                    for (i, (v, t)) in vs.iter().zip(rets).enumerate() {
                        let found = self.value_type(*v);
                        if found != *t {
                            self.report(VerifyErrorKind::ReturnType { index: i, expected: *t, found });
                        }
                    }
                }
                Some(vec![])
            }
        };
        if let Some(expected) = expected_results {
            if expected.len() != data.results.len() {
                self.report(VerifyErrorKind::ResultCount { expected: expected.len(), found: data.results.len() });
            } else {
                for (i, (r, t)) in data.results.iter().zip(&expected).enumerate() {
                    let found = self.value_type(*r);
                    if found != *t {
                        self.report(VerifyErrorKind::ResultType { index: i, expected: *t, found });
                    }
                }
            }
        }
    }

    /// Call arguments against the callee's parameters.
    fn check_args(&mut self, callee: &str, params: &[Type], args: &[Value]) {
        if params.len() != args.len() {
            self.report(VerifyErrorKind::CallArity {
                callee: callee.to_string(),
                expected: params.len(),
                found: args.len(),
            });
            return;
        }
        for (i, (a, t)) in args.iter().zip(params).enumerate() {
            let found = self.value_type(*a);
            if found != *t {
                self.report(VerifyErrorKind::CallArgType { callee: callee.to_string(), index: i, expected: *t, found });
            }
        }
    }

    /// A branch target exists, is not the entry, and gets arguments of its parameters' types.
    fn check_block_call(&mut self, bc: &BlockCall) {
        let f = self.func;
        if !f.blocks.is_valid(bc.block) || !self.in_layout[bc.block] {
            self.report(VerifyErrorKind::UnknownBlock(bc.block));
            return;
        }
        if Some(bc.block) == f.entry() {
            self.report(VerifyErrorKind::BranchToEntry);
        }
        let params = &f.blocks[bc.block].params;
        if params.len() != bc.args.len() {
            self.report(VerifyErrorKind::BranchArity { block: bc.block, expected: params.len(), found: bc.args.len() });
            return;
        }
        for (i, (a, p)) in bc.args.iter().zip(params).enumerate() {
            let (found, expected) = (self.value_type(*a), self.value_type(*p));
            if found != expected {
                self.report(VerifyErrorKind::BranchArgType { block: bc.block, index: i, expected, found });
            }
        }
    }

    /// Cases are distinct known tags of one closure signature.
    fn check_switch(&mut self, cases: &[(TagId, BlockCall)]) {
        if cases.is_empty() {
            self.report(VerifyErrorKind::EmptySwitch);
            return;
        }
        let mut seen = FxHashSet::default();
        let mut expected: Option<Signature> = None;
        for (tag, bc) in cases {
            self.check_block_call(bc);
            if !self.module.tags.is_valid(*tag) {
                self.report(VerifyErrorKind::UnknownTag(*tag));
                continue;
            }
            if !seen.insert(*tag) {
                self.report(VerifyErrorKind::DuplicateCase(*tag));
            }
            // A tag whose function is missing or malformed is reported with the tags.
            let Some(sig) = self.module.tag_signature(*tag) else { continue };
            match &expected {
                None => expected = Some(sig),
                Some(e) if *e != sig => {
                    let e = e.clone();
                    self.report(VerifyErrorKind::CaseSignature { tag: *tag, expected: e, found: sig });
                }
                Some(_) => {}
            }
        }
    }
}
