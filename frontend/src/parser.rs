//! Recursive-descent parser for docs/language.md §1–4, with name resolution done as it goes
//! (definitions are ordered and never recursive, so scopes are syntactic).
//!
//! Nesting is bounded: a term deeper than `MAX_DEPTH` is a located error, never a stack overflow.

use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::builtins::Builtin;
use crate::diag::Diagnostic;
use crate::lexer::{lex, Tok, Token};
use crate::span::Span;
use crate::syntax::*;
use crate::types::{Classes, Scheme, TyVar, Type};

/// The deepest syntactic nesting (parentheses, binders, prefix operators) the parser accepts.
pub const MAX_NESTING: u32 = 1000;
/// The deepest term (in nodes, e.g. a chain `1 + 1 + ...`) the front end accepts.
pub const MAX_DEPTH: u32 = 10_000;

/// Type variables written in annotations are numbered from here, per definition;
/// inference gives each its own fresh variable.
pub const ANN_VAR_BASE: u32 = 1 << 30;

type Res<T> = Result<T, Diagnostic>;

/// Parses a whole program. Names are resolved; types are placeholders until inference.
pub fn parse_program(src: &str) -> Res<Program> {
    let tokens = lex(src)?;
    let mut p = Parser::new(tokens);
    let mut defs = Vec::new();
    while p.peek() != &Tok::Eof {
        let def = p.def(&defs)?;
        defs.push(def);
    }
    Ok(Program { defs, next_local: p.next_local })
}

/// Parses one expression in the scope of `program`'s definitions (for the REPL and tests).
pub fn parse_expr_in(src: &str, program: &Program) -> Res<(E, u32)> {
    let tokens = lex(src)?;
    let mut p = Parser::new(tokens);
    p.next_local = program.next_local;
    for (i, d) in program.defs.iter().enumerate() {
        p.globals.insert(d.name.clone(), DefId(i as u32));
    }
    let e = p.expr()?;
    p.expect(Tok::Eof, "end of input")?;
    Ok((e.e, p.next_local))
}

/// Parses definitions in the scope of `program`'s (the REPL's `def` and `:load`). A name
/// `program` already defines is shadowed for what follows, not an error; twice in `src` is.
pub fn parse_defs_in(src: &str, program: &Program) -> Res<(Vec<Def>, u32)> {
    let tokens = lex(src)?;
    let mut p = Parser::new(tokens);
    p.next_local = program.next_local;
    p.def_base = program.defs.len() as u32;
    for (i, d) in program.defs.iter().enumerate() {
        p.globals.insert(d.name.clone(), DefId(i as u32));
    }
    let mut defs = Vec::new();
    while p.peek() != &Tok::Eof {
        let def = p.def(&defs)?;
        defs.push(def);
    }
    Ok((defs, p.next_local))
}

/// Parses a type in surface syntax (annotation variables numbered from `ANN_VAR_BASE`).
pub fn parse_type(src: &str) -> Res<Type> {
    let tokens = lex(src)?;
    let mut p = Parser::new(tokens);
    let t = p.ty()?;
    p.expect(Tok::Eof, "end of type")?;
    Ok(t)
}

/// Parses a builtin's signature into a scheme over variables numbered from 0.
pub(crate) fn parse_builtin_signature(sig: &str, classes: &[(&str, Classes)]) -> Scheme {
    let t = parse_type(sig).unwrap_or_else(|d| panic!("builtin signature `{sig}`: {}", d.message));
    let mut vars: Vec<TyVar> = Vec::new();
    t.visit(&mut |t| {
        if let Type::Var(v) = t {
            if !vars.contains(v) {
                vars.push(*v)
            }
        }
    });
    // The parser numbered names in order of appearance from ANN_VAR_BASE; renumber from 0.
    let ty = t.map_vars(&mut |v| Some(Type::Var(TyVar(v.0 - ANN_VAR_BASE))));
    let names = tyvar_names(sig);
    let vars = vars
        .into_iter()
        .map(|v| {
            let idx = v.0 - ANN_VAR_BASE;
            let name = &names[idx as usize];
            let c = classes.iter().find(|(n, _)| n == name).map(|(_, c)| *c).unwrap_or(Classes::NONE);
            (TyVar(idx), c)
        })
        .collect();
    Scheme { vars, ty }
}

fn tyvar_names(sig: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for t in lex(sig).unwrap_or_default() {
        if let Tok::TyVar(n) = t.tok {
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    names
}

/// A parsed expression with the depth of its tree.
struct PE {
    e: E,
    d: u32,
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    scopes: Vec<(Name, LocalId)>,
    globals: FxHashMap<Name, DefId>,
    next_local: u32,
    /// Names of annotation type variables in the current definition.
    ann_vars: Vec<String>,
    /// Recursion depth of the parser itself.
    depth: u32,
    current_def: Option<Name>,
    /// The `DefId` of the first definition parsed (after those of a REPL session).
    def_base: u32,
}

fn mk(kind: ExprKind, span: Span) -> E {
    Expr::new(kind, span, Type::Unit)
}

impl Parser {
    fn new(toks: Vec<Token>) -> Parser {
        Parser {
            toks,
            pos: 0,
            scopes: Vec::new(),
            globals: FxHashMap::default(),
            next_local: 0,
            ann_vars: Vec::new(),
            depth: 0,
            current_def: None,
            def_base: 0,
        }
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }
    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }
    fn span(&self) -> Span {
        self.toks[self.pos].span
    }
    fn prev_span(&self) -> Span {
        self.toks[self.pos.saturating_sub(1)].span
    }
    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }
    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == t {
            self.bump();
            true
        } else {
            false
        }
    }
    fn expect(&mut self, t: Tok, what: &str) -> Res<Span> {
        if self.peek() == &t {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(what))
        }
    }
    fn unexpected(&self, what: &str) -> Diagnostic {
        // At the end of the file, point just after the last token rather than at an empty line.
        let span = if self.peek() == &Tok::Eof && self.pos > 0 {
            let end = self.prev_span().hi as usize;
            Span::new(end, end)
        } else {
            self.span()
        };
        Diagnostic::error(span, format!("expected {what}, found {}", self.peek().describe()))
    }

    fn enter(&mut self) -> Res<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(self.too_deep());
        }
        Ok(())
    }
    fn leave(&mut self) {
        self.depth -= 1;
    }
    fn too_deep(&self) -> Diagnostic {
        Diagnostic::error(self.span(), format!("expression is nested too deeply (the limit is {MAX_NESTING} levels)"))
    }
    /// Builds a node one level above `d`, refusing trees deeper than the limit.
    fn node(&self, kind: ExprKind, span: Span, d: u32) -> Res<PE> {
        if d + 1 > MAX_DEPTH {
            return Err(Diagnostic::error(
                span,
                format!("expression is nested too deeply (the limit is {MAX_DEPTH} levels)"),
            ));
        }
        Ok(PE { e: mk(kind, span), d: d + 1 })
    }

    fn fresh(&mut self) -> LocalId {
        fresh_local(&mut self.next_local)
    }

    // ---- definitions -------------------------------------------------------------------------

    fn def(&mut self, earlier: &[Def]) -> Res<Def> {
        let start = self.expect(Tok::Def, "`def`")?;
        let (name, name_span) = match self.peek().clone() {
            Tok::Ident(n) => (Name::from(n.as_str()), self.bump().span),
            _ => return Err(self.unexpected("a definition name after `def`")),
        };
        if let Some(prev) = earlier.iter().find(|d| d.name == name) {
            return Err(Diagnostic::error(name_span, format!("`{name}` is defined twice"))
                .with_label(prev.name_span, "first defined here"));
        }
        self.ann_vars.clear();
        self.current_def = Some(name.clone());
        let mut binders = Vec::new();
        let scope_mark = self.scopes.len();
        while matches!(self.peek(), Tok::Ident(_) | Tok::Underscore | Tok::LParen) {
            let b = self.pattern(true)?;
            self.bind(&b)?;
            binders.push(b);
        }
        let ret_ann = if self.eat(&Tok::Colon) { Some((self.ty()?, self.prev_span())) } else { None };
        if !matches!(self.peek(), Tok::Eq) {
            return Err(self.unexpected(if binders.is_empty() && ret_ann.is_none() {
                "`=` or a parameter"
            } else {
                "`=`"
            }));
        }
        self.bump();
        let body = self.expr()?;
        self.scopes.truncate(scope_mark);
        let mut e = body.e;
        let mut d = body.d;
        if let Some((t, _)) = ret_ann {
            let span = e.span;
            let pe = self.node(ExprKind::Ann(e, t), span, d)?;
            e = pe.e;
            d = pe.d;
        }
        for b in binders.into_iter().rev() {
            let span = b.span.to(e.span);
            let pe = self.node(ExprKind::Lam(Rc::new(b), e), span, d)?;
            e = pe.e;
            d = pe.d;
        }
        self.globals.insert(name.clone(), DefId(self.def_base + earlier.len() as u32));
        self.current_def = None;
        let span = start.to(self.prev_span());
        Ok(Def { name, name_span, span, body: e, scheme: Scheme::mono(Type::Unit) })
    }

    // ---- patterns ----------------------------------------------------------------------------

    /// `NAME | _ | () | (p, p, ...) | (NAME : type) | (p)`.
    fn pattern(&mut self, allow_ann: bool) -> Res<Pat> {
        self.enter()?;
        let r = self.pattern_inner(allow_ann);
        self.leave();
        r
    }

    fn pattern_inner(&mut self, allow_ann: bool) -> Res<Pat> {
        let start = self.span();
        match self.peek().clone() {
            Tok::Ident(n) => {
                self.bump();
                let id = self.fresh();
                Ok(Pat { kind: PatKind::Var(n.as_str().into(), id), span: start, ty: Type::Unit, ann: None })
            }
            Tok::Underscore => {
                self.bump();
                Ok(Pat { kind: PatKind::Wild, span: start, ty: Type::Unit, ann: None })
            }
            Tok::LParen => {
                self.bump();
                if self.eat(&Tok::RParen) {
                    return Ok(Pat {
                        kind: PatKind::Unit,
                        span: start.to(self.prev_span()),
                        ty: Type::Unit,
                        ann: None,
                    });
                }
                let first = self.pattern(allow_ann)?;
                if self.eat(&Tok::Colon) {
                    let t = self.ty()?;
                    self.expect(Tok::RParen, "`)` after the type annotation")?;
                    return Ok(Pat { span: start.to(self.prev_span()), ann: Some(t), ..first });
                }
                let mut ps = vec![first];
                while self.eat(&Tok::Comma) {
                    ps.push(self.pattern(allow_ann)?);
                }
                self.expect(Tok::RParen, "`,` or `)` in a pattern")?;
                if ps.len() == 1 {
                    return Ok(ps.pop().expect("one pattern"));
                }
                Ok(Pat { kind: PatKind::Tuple(ps.into()), span: start.to(self.prev_span()), ty: Type::Unit, ann: None })
            }
            _ => Err(self.unexpected("a pattern (a name, `_` or a tuple of patterns)")),
        }
    }

    /// Brings a pattern's variables into scope, refusing a name bound twice in one pattern.
    fn bind(&mut self, p: &Pat) -> Res<()> {
        let vars = p.binders();
        for (i, (n, _)) in vars.iter().enumerate() {
            if vars[..i].iter().any(|(m, _)| m == n) {
                return Err(Diagnostic::error(p.span, format!("`{n}` is bound twice in this pattern")));
            }
        }
        self.scopes.extend(vars);
        Ok(())
    }

    // ---- expressions -------------------------------------------------------------------------

    fn expr(&mut self) -> Res<PE> {
        self.enter()?;
        let r = self.expr_inner();
        self.leave();
        r
    }

    fn expr_inner(&mut self) -> Res<PE> {
        match self.peek() {
            Tok::Fun | Tok::Lambda => self.lambda(),
            Tok::Let => self.let_expr(),
            Tok::If => self.if_expr(),
            _ => self.binary(1),
        }
    }

    fn lambda(&mut self) -> Res<PE> {
        let start = self.span();
        let is_lambda = self.bump().tok == Tok::Lambda;
        let mark = self.scopes.len();
        let mut binders = Vec::new();
        while matches!(self.peek(), Tok::Ident(_) | Tok::Underscore | Tok::LParen) {
            let b = self.pattern(true)?;
            self.bind(&b)?;
            binders.push(b);
        }
        if binders.is_empty() {
            return Err(self.unexpected("a parameter after `fun`"));
        }
        if is_lambda {
            self.expect(Tok::Dot, "`.` after the parameters of `λ`")?;
        } else {
            self.expect(Tok::Arrow, "`->` after the parameters of `fun`")?;
        }
        let body = self.expr()?;
        self.scopes.truncate(mark);
        let (mut e, mut d) = (body.e, body.d);
        for b in binders.into_iter().rev() {
            let span = start.to(e.span);
            let _ = b.span;
            let pe = self.node(ExprKind::Lam(Rc::new(b), e), span, d)?;
            e = pe.e;
            d = pe.d;
        }
        Ok(PE { e, d })
    }

    fn let_expr(&mut self) -> Res<PE> {
        let start = self.bump().span;
        let pat = self.pattern(false)?;
        let ann = if self.eat(&Tok::Colon) { Some(self.ty()?) } else { None };
        self.expect(Tok::Eq, "`=` in `let`")?;
        let rhs = self.expr().map_err(|d| {
            // `let x = 1` and then `x + 1` on the next line: the rhs ran on and met `x`.
            let bound = pat.binders().iter().any(|(n, _)| d.message == format!("unknown name `{n}`"));
            if bound {
                d.with_note("is this `let` missing its `in`? The form is `let x = e in body`")
            } else {
                d
            }
        })?;
        self.expect(Tok::In, "`in` after the bound expression of `let`")?;
        let mark = self.scopes.len();
        self.bind(&pat)?;
        let body = self.expr()?;
        self.scopes.truncate(mark);
        let (mut r, mut rd) = (rhs.e, rhs.d);
        if let Some(t) = ann {
            let span = r.span;
            let pe = self.node(ExprKind::Ann(r, t), span, rd)?;
            r = pe.e;
            rd = pe.d;
        }
        let span = start.to(body.e.span);
        self.node(ExprKind::Let(Rc::new(pat), r, body.e), span, rd.max(body.d))
    }

    fn if_expr(&mut self) -> Res<PE> {
        let start = self.bump().span;
        let c = self.expr()?;
        self.expect(Tok::Then, "`then`")?;
        let t = self.expr()?;
        self.expect(Tok::Else, "`else` (every `if` has both branches)")?;
        let e = self.expr()?;
        let span = start.to(e.e.span);
        let d = c.d.max(t.d).max(e.d);
        self.node(ExprKind::If(c.e, t.e, e.e), span, d)
    }

    fn binop_at(&self, level: u8) -> Option<BinOp> {
        let op = match self.peek() {
            Tok::OrOr => BinOp::Or,
            Tok::AndAnd => BinOp::And,
            Tok::EqEq => BinOp::Eq,
            Tok::NotEq => BinOp::Ne,
            Tok::Lt => BinOp::Lt,
            Tok::Le => BinOp::Le,
            Tok::Gt => BinOp::Gt,
            Tok::Ge => BinOp::Ge,
            Tok::Oplus => BinOp::Oplus,
            Tok::Ominus => BinOp::Ominus,
            Tok::Plus => BinOp::Add,
            Tok::Minus => BinOp::Sub,
            Tok::Star => BinOp::Mul,
            Tok::Slash => BinOp::Div,
            Tok::Percent => BinOp::Rem,
            _ => return None,
        };
        (op.prec() == level).then_some(op)
    }

    /// Left-associative levels 1–6; comparisons (level 3) do not chain.
    fn binary(&mut self, level: u8) -> Res<PE> {
        if level > 6 {
            return self.unary();
        }
        let mut lhs = self.binary(level + 1)?;
        while let Some(op) = self.binop_at(level) {
            let op_span = self.bump().span;
            let rhs = self.operand(level + 1)?;
            let span = lhs.e.span.to(rhs.e.span);
            lhs = self.node(ExprKind::Bin(op, lhs.e, rhs.e), span, lhs.d.max(rhs.d))?;
            if level == 3 && self.binop_at(3).is_some() {
                return Err(Diagnostic::error(self.span(), "comparison operators cannot be chained; use `&&`")
                    .with_label(op_span, "first comparison"));
            }
        }
        Ok(lhs)
    }

    /// The right operand of a binary operator: `fun`, `let` and `if` extend as far right as possible.
    fn operand(&mut self, level: u8) -> Res<PE> {
        match self.peek() {
            Tok::Fun | Tok::Lambda | Tok::Let | Tok::If => self.expr(),
            _ => self.binary(level),
        }
    }

    fn unary(&mut self) -> Res<PE> {
        // Only a prefix operator is a level the user wrote; the rest recurse through `expr`,
        // which counts its own.
        let prefix = matches!(self.peek(), Tok::Minus | Tok::Not);
        if prefix {
            self.enter()?;
        }
        let r = match self.peek() {
            Tok::Minus => {
                let start = self.bump().span;
                let e = self.unary()?;
                // `-3` and `-2.5` are literals, so `2 ^ -1` and `bag{x # -1}` read naturally.
                match &e.e.kind {
                    ExprKind::Lit(Lit::Int(n)) if e.e.span.lo == start.hi => {
                        Ok(PE { e: mk(ExprKind::Lit(Lit::Int(n.wrapping_neg())), start.to(e.e.span)), d: e.d })
                    }
                    ExprKind::Lit(Lit::Real(r)) if e.e.span.lo == start.hi => {
                        Ok(PE { e: mk(ExprKind::Lit(Lit::Real(-r)), start.to(e.e.span)), d: e.d })
                    }
                    _ => {
                        let span = start.to(e.e.span);
                        self.node(ExprKind::Neg(e.e), span, e.d)
                    }
                }
            }
            Tok::Not => {
                let start = self.bump().span;
                let e = self.unary()?;
                let span = start.to(e.e.span);
                self.node(ExprKind::Not(e.e), span, e.d)
            }
            Tok::Fun | Tok::Lambda | Tok::Let | Tok::If => self.expr(),
            _ => self.power(),
        };
        if prefix {
            self.leave();
        }
        r
    }

    /// `^` is right-associative and binds tighter than unary minus.
    fn power(&mut self) -> Res<PE> {
        let base = self.application()?;
        if self.peek() == &Tok::Caret {
            self.bump();
            self.enter()?;
            let exp = self.unary();
            self.leave();
            let exp = exp?;
            let span = base.e.span.to(exp.e.span);
            return self.node(ExprKind::Bin(BinOp::Pow, base.e, exp.e), span, base.d.max(exp.d));
        }
        Ok(base)
    }

    fn starts_atom(&self) -> bool {
        matches!(
            self.peek(),
            Tok::Ident(_)
                | Tok::Int(_)
                | Tok::Real(_)
                | Tok::True
                | Tok::False
                | Tok::LParen
                | Tok::LBracket
                | Tok::BagOpen
                | Tok::MapOpen
        )
    }

    fn application(&mut self) -> Res<PE> {
        let mut f = match self.peek() {
            Tok::Pullback => {
                let start = self.bump().span;
                let f = self.required_arg("pullback f w")?;
                let w = self.required_arg("pullback f w")?;
                let span = start.to(w.e.span);
                self.node(ExprKind::Pullback(f.e, w.e), span, f.d.max(w.d))?
            }
            Tok::Dual => self.dual()?,
            Tok::Derive => {
                let start = self.bump().span;
                let e = self.required_arg("derive e")?;
                let span = start.to(e.e.span);
                self.node(ExprKind::Derive(e.e), span, e.d)?
            }
            _ => {
                if !self.starts_atom() {
                    return Err(self.unexpected("an expression"));
                }
                self.postfix()?
            }
        };
        while self.starts_atom() {
            let a = self.postfix()?;
            let span = f.e.span.to(a.e.span);
            f = self.node(ExprKind::App(f.e, a.e), span, f.d.max(a.d))?;
        }
        Ok(f)
    }

    fn required_arg(&mut self, form: &str) -> Res<PE> {
        if !self.starts_atom() {
            return Err(self.unexpected(&format!("an argument (the form is `{form}`)")));
        }
        self.postfix()
    }

    /// `dual (fun v -> s) w`: the first argument must be a one-parameter function literal.
    fn dual(&mut self) -> Res<PE> {
        let start = self.bump().span;
        let lam_start = self.span();
        let wrong = |s: Span| {
            Diagnostic::error(s, "`dual` expects a function literal of one parameter, as in `dual (fun v -> e) w`")
        };
        if self.peek() != &Tok::LParen || !matches!(self.peek_at(1), Tok::Fun | Tok::Lambda) {
            return Err(wrong(lam_start));
        }
        self.bump();
        let lam = self.lambda()?;
        self.expect(Tok::RParen, "`)` after the function of `dual`")?;
        let (pat, body) = match &lam.e.kind {
            ExprKind::Lam(p, b) if !matches!(b.kind, ExprKind::Lam(..)) => (p.clone(), b.clone()),
            _ => return Err(wrong(lam.e.span)),
        };
        let w = self.required_arg("dual (fun v -> e) w")?;
        let span = start.to(w.e.span);
        self.node(ExprKind::Dual(pat, body, w.e), span, lam.d.max(w.d))
    }

    fn postfix(&mut self) -> Res<PE> {
        let mut e = self.atom()?;
        loop {
            match self.peek() {
                Tok::Dot => {
                    self.bump();
                    let (n, s) = match self.peek().clone() {
                        Tok::Int(n) => (n, self.bump().span),
                        _ => return Err(self.unexpected("a component number after `.` (as in `p.1`)")),
                    };
                    if n < 1 {
                        return Err(Diagnostic::error(s, "tuple components are numbered from 1"));
                    }
                    let span = e.e.span.to(s);
                    e = self.node(ExprKind::Proj(e.e, (n - 1) as usize), span, e.d)?;
                }
                Tok::DotBracket => {
                    self.bump();
                    let i = self.expr()?;
                    self.expect(Tok::RBracket, "`]` after the index")?;
                    let span = e.e.span.to(self.prev_span());
                    e = self.node(ExprKind::Index(e.e, i.e), span, e.d.max(i.d))?;
                }
                _ => return Ok(e),
            }
        }
    }

    fn resolve(&self, name: &str, span: Span) -> Res<VarRef> {
        if let Some((_, id)) = self.scopes.iter().rev().find(|(n, _)| &**n == name) {
            return Ok(VarRef::Local(*id));
        }
        if let Some(d) = self.globals.get(name) {
            return Ok(VarRef::Global(*d));
        }
        if let Some(b) = Builtin::from_name(name) {
            return Ok(VarRef::Builtin(b));
        }
        let mut d = Diagnostic::error(span, format!("unknown name `{name}`"));
        if self.current_def.as_deref() == Some(name) {
            d = d.with_note("a definition cannot refer to itself: Nabla has no recursion (use fold, iterate or build)");
        }
        Err(d)
    }

    fn atom(&mut self) -> Res<PE> {
        self.atom_inner()
    }

    fn atom_inner(&mut self) -> Res<PE> {
        let start = self.span();
        let leaf = |kind| Ok(PE { e: mk(kind, start), d: 1 });
        match self.peek().clone() {
            Tok::Ident(n) => {
                self.bump();
                let r = self.resolve(&n, start)?;
                leaf(ExprKind::Var(n.as_str().into(), r))
            }
            Tok::Int(n) => {
                self.bump();
                leaf(ExprKind::Lit(Lit::Int(n)))
            }
            Tok::Real(r) => {
                self.bump();
                leaf(ExprKind::Lit(Lit::Real(r)))
            }
            Tok::True => {
                self.bump();
                leaf(ExprKind::Lit(Lit::Bool(true)))
            }
            Tok::False => {
                self.bump();
                leaf(ExprKind::Lit(Lit::Bool(false)))
            }
            Tok::LParen => {
                self.bump();
                if self.eat(&Tok::RParen) {
                    return Ok(PE { e: mk(ExprKind::Lit(Lit::Unit), start.to(self.prev_span())), d: 1 });
                }
                let first = self.expr()?;
                if self.eat(&Tok::RParen) {
                    return Ok(first);
                }
                let mut items = vec![first];
                while self.eat(&Tok::Comma) {
                    items.push(self.expr()?);
                }
                self.expect(Tok::RParen, "`,` or `)`")?;
                let d = items.iter().map(|p| p.d).max().unwrap_or(0);
                self.node(ExprKind::Tuple(items.into_iter().map(|p| p.e).collect()), start.to(self.prev_span()), d)
            }
            Tok::LBracket => {
                self.bump();
                let mut items = Vec::new();
                if !self.eat(&Tok::RBracket) {
                    loop {
                        items.push(self.expr()?);
                        if self.eat(&Tok::RBracket) {
                            break;
                        }
                        self.expect(Tok::Comma, "`,` or `]` in an array literal")?;
                    }
                }
                let d = items.iter().map(|p| p.d).max().unwrap_or(0);
                self.node(ExprKind::Array(items.into_iter().map(|p| p.e).collect()), start.to(self.prev_span()), d)
            }
            Tok::BagOpen => {
                self.bump();
                let mut items = Vec::new();
                let mut d = 0;
                if !self.eat(&Tok::RBrace) {
                    loop {
                        let e = self.expr()?;
                        d = d.max(e.d);
                        let mult = if self.eat(&Tok::Hash) { self.multiplicity()? } else { 1 };
                        items.push((e.e, mult));
                        if self.eat(&Tok::RBrace) {
                            break;
                        }
                        self.expect(Tok::Comma, "`,`, `#` or `}` in a bag literal")?;
                    }
                }
                self.node(ExprKind::Bag(items), start.to(self.prev_span()), d)
            }
            Tok::MapOpen => {
                self.bump();
                let mut items = Vec::new();
                let mut d = 0;
                if !self.eat(&Tok::RBrace) {
                    loop {
                        let k = self.expr()?;
                        self.expect(Tok::Arrow, "`->` between a key and its value")?;
                        let v = self.expr()?;
                        d = d.max(k.d).max(v.d);
                        items.push((k.e, v.e));
                        if self.eat(&Tok::RBrace) {
                            break;
                        }
                        self.expect(Tok::Comma, "`,` or `}` in a map literal")?;
                    }
                }
                self.node(ExprKind::Map(items), start.to(self.prev_span()), d)
            }
            _ => Err(self.unexpected("an expression")),
        }
    }

    fn multiplicity(&mut self) -> Res<i64> {
        let neg = self.eat(&Tok::Minus);
        match self.peek().clone() {
            Tok::Int(n) => {
                self.bump();
                Ok(if neg { n.wrapping_neg() } else { n })
            }
            _ => Err(self.unexpected("an integer multiplicity after `#`")),
        }
    }

    // ---- types -------------------------------------------------------------------------------

    fn ty(&mut self) -> Res<Type> {
        self.enter()?;
        let r = self.ty_inner();
        self.leave();
        r
    }

    fn ty_inner(&mut self) -> Res<Type> {
        let a = self.ty_tuple()?;
        if self.eat(&Tok::Arrow) {
            let b = self.ty()?;
            return Ok(Type::fun(a, b));
        }
        Ok(a)
    }

    fn ty_tuple(&mut self) -> Res<Type> {
        let first = self.ty_app()?;
        if self.peek() != &Tok::Star {
            return Ok(first);
        }
        let mut ts = vec![first];
        while self.eat(&Tok::Star) {
            ts.push(self.ty_app()?);
        }
        Ok(Type::tuple(ts))
    }

    fn ty_app(&mut self) -> Res<Type> {
        let ctor = match self.peek() {
            Tok::Ident(n) => n.clone(),
            _ => return self.ty_atom(),
        };
        let one = |p: &mut Parser| -> Res<Type> { p.ty_atom() };
        let t = match ctor.as_str() {
            "Array" | "Bag" | "Group" | "Dual" | "Omega" | "Delta" => {
                self.bump();
                let a = one(self)?;
                match ctor.as_str() {
                    "Array" => Type::array(a),
                    "Bag" => Type::Bag(Rc::new(a)),
                    "Group" => Type::Group(Rc::new(a)),
                    "Dual" => Type::dual(a),
                    "Omega" => Type::omega(a),
                    _ => Type::delta(&a),
                }
            }
            "Map" => {
                self.bump();
                let k = one(self)?;
                let v = one(self)?;
                Type::Map(Rc::new(k), Rc::new(v))
            }
            _ => return self.ty_atom(),
        };
        Ok(t)
    }

    fn ty_atom(&mut self) -> Res<Type> {
        let span = self.span();
        match self.peek().clone() {
            Tok::Ident(n) => {
                let t = match n.as_str() {
                    "Real" => Type::Real,
                    "Int" => Type::Int,
                    "Bool" => Type::Bool,
                    "Unit" => Type::Unit,
                    "Array" | "Bag" | "Group" | "Dual" | "Omega" | "Delta" | "Map" => {
                        return Err(Diagnostic::error(span, format!("`{n}` needs an argument here; write `({n} ...)`")))
                    }
                    _ => return Err(Diagnostic::error(span, format!("unknown type `{n}`"))),
                };
                self.bump();
                Ok(t)
            }
            Tok::TyVar(n) => {
                self.bump();
                let idx = match self.ann_vars.iter().position(|m| *m == n) {
                    Some(i) => i,
                    None => {
                        self.ann_vars.push(n);
                        self.ann_vars.len() - 1
                    }
                };
                Ok(Type::Var(TyVar(ANN_VAR_BASE + idx as u32)))
            }
            Tok::LParen => {
                self.bump();
                if self.eat(&Tok::RParen) {
                    return Ok(Type::Unit);
                }
                let t = self.ty()?;
                self.expect(Tok::RParen, "`)` in a type")?;
                Ok(t)
            }
            _ => Err(self.unexpected("a type")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_paper_example() {
        let p = parse_program(
            "def g (x, y) = (x + 1.0, 2.0 * x + y * y)\n\
             def mult (a, b) = a * b\n\
             def pow2 z = z * z\n\
             def f p = pow2 (mult (g p))\n\
             def main = (pullback f (omega 1.0)) (1.0, 3.0)\n",
        )
        .unwrap();
        assert_eq!(p.defs.len(), 5);
        assert!(matches!(p.defs[4].body.kind, ExprKind::App(..)));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        crate::with_big_stack(deep_nesting)
    }

    fn deep_nesting() {
        let src = format!("def main = {}1{}", "(".repeat(100_000), ")".repeat(100_000));
        let e = parse_program(&src).unwrap_err();
        assert!(e.message.contains("nested too deeply"), "{}", e.message);
        let chain = format!("def main = 1{}", " + 1".repeat(100_000));
        assert!(parse_program(&chain).unwrap_err().message.contains("nested too deeply"));
    }

    #[test]
    fn unknown_names_are_located() {
        let e = parse_program("def main = 1 + y").unwrap_err();
        assert_eq!(e.message, "unknown name `y`");
        assert_eq!(e.span, Span::new(15, 16));
    }
}
