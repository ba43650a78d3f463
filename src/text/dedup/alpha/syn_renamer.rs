//! The reference renamer: parses the file with `syn` and renames on the
//! syntax tree. Used where the token renamer (`tokens`) meets a construct it
//! does not model, and as the reference its tests compare against.
//!
//! Inside every function body each local binding (parameters, `let`, closure
//! parameters, `match`, `if let`, `while let` and `for` patterns) gets the
//! name `__assay_local_N`, N being the order in which the function binds it.
//! Uses are renamed through a stack of scopes. Identifier patterns that start
//! with an upper-case letter or name a top-level item of the file are taken
//! as paths; inside macro calls, identifiers bound in scope are renamed as
//! tokens (not after a `.`) and so are implicit format arguments in string
//! literals. The renamed tree is hashed like the exact fingerprint, tagged
//! so it never equals an exact fingerprint nor a token-renamer one.

use std::collections::{HashMap, HashSet};

use proc_macro2::{Ident, Literal, TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, FieldPat, FieldValue, Member, Pat};

use crate::text::dedup::{hash_tokens, Fingerprint};

/// The alpha-renamed fingerprint computed on a `syn` tree, or `None` if
/// `syn` does not parse the tokens as a file.
pub(super) fn fingerprint(tokens: TokenStream) -> Option<Fingerprint> {
    let mut file: syn::File = syn::parse2(tokens).ok()?;
    let items = file
        .items
        .iter()
        .filter_map(item_name)
        .collect::<HashSet<String>>();
    let mut renamer = Renamer {
        items,
        scopes: Vec::new(),
        next: 0,
        pattern: None,
    };
    renamer.visit_file_mut(&mut file);
    // Tag the stream so an alpha fingerprint never equals an exact one.
    let mut tokens = TokenStream::new();
    tokens.extend([TokenTree::Ident(Ident::new(
        "__assay_alpha",
        proc_macro2::Span::call_site(),
    ))]);
    file.to_tokens(&mut tokens);
    Some(hash_tokens(tokens))
}

struct Renamer {
    /// Names of the file's top-level items: never taken as bindings.
    items: HashSet<String>,
    /// Innermost last; each maps a source name to its position.
    scopes: Vec<HashMap<String, usize>>,
    /// The next position in the current function.
    next: usize,
    /// Names bound so far by the pattern being bound (an or-pattern binds
    /// the same name in each alternative).
    pattern: Option<HashMap<String, usize>>,
}

fn local_name(n: usize) -> String {
    format!("__assay_local_{n}")
}

fn item_name(item: &syn::Item) -> Option<String> {
    Some(match item {
        syn::Item::Const(i) => i.ident.to_string(),
        syn::Item::Static(i) => i.ident.to_string(),
        syn::Item::Fn(i) => i.sig.ident.to_string(),
        syn::Item::Struct(i) => i.ident.to_string(),
        syn::Item::Enum(i) => i.ident.to_string(),
        syn::Item::Union(i) => i.ident.to_string(),
        syn::Item::Type(i) => i.ident.to_string(),
        syn::Item::Mod(i) => i.ident.to_string(),
        _ => return None,
    })
}

impl Renamer {
    fn lookup(&self, name: &str) -> Option<usize> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    /// Runs `f` as a new function: fresh scopes and positions, restored after
    /// (nested functions cannot see their parent's locals).
    fn in_function(&mut self, f: impl FnOnce(&mut Self)) {
        let scopes = std::mem::replace(&mut self.scopes, vec![HashMap::new()]);
        let next = std::mem::replace(&mut self.next, 0);
        f(self);
        self.scopes = scopes;
        self.next = next;
    }

    fn in_scope(&mut self, f: impl FnOnce(&mut Self)) {
        self.scopes.push(HashMap::new());
        f(self);
        self.scopes.pop();
    }

    /// Binds every identifier a pattern introduces in the innermost scope,
    /// and visits the expressions a pattern may hold (range bounds, consts).
    fn bind(&mut self, pat: &mut Pat) {
        let outer = self.pattern.replace(HashMap::new());
        self.bind_inner(pat);
        self.pattern = outer;
    }

    fn bind_inner(&mut self, pat: &mut Pat) {
        match pat {
            Pat::Ident(p) => {
                let name = p.ident.to_string();
                let is_path = p.by_ref.is_none()
                    && p.mutability.is_none()
                    && p.subpat.is_none()
                    && (name.starts_with(|c: char| c.is_uppercase()) || self.items.contains(&name));
                if !is_path && name != "self" {
                    let pos = match self.pattern.as_ref().and_then(|m| m.get(&name)) {
                        Some(&pos) => pos,
                        None => {
                            let pos = self.next;
                            self.next += 1;
                            pos
                        }
                    };
                    if let Some(m) = self.pattern.as_mut() {
                        m.insert(name.clone(), pos);
                    }
                    self.scopes
                        .last_mut()
                        .expect("a scope is open while binding")
                        .insert(name, pos);
                    p.ident = Ident::new(&local_name(pos), p.ident.span());
                }
                if let Some((_, sub)) = &mut p.subpat {
                    self.bind_inner(sub);
                }
            }
            Pat::Struct(p) => {
                for field in &mut p.fields {
                    self.bind_field(field);
                }
            }
            Pat::TupleStruct(p) => p.elems.iter_mut().for_each(|e| self.bind_inner(e)),
            Pat::Tuple(p) => p.elems.iter_mut().for_each(|e| self.bind_inner(e)),
            Pat::Slice(p) => p.elems.iter_mut().for_each(|e| self.bind_inner(e)),
            Pat::Or(p) => p.cases.iter_mut().for_each(|e| self.bind_inner(e)),
            Pat::Reference(p) => self.bind_inner(&mut p.pat),
            Pat::Paren(p) => self.bind_inner(&mut p.pat),
            Pat::Type(p) => self.bind_inner(&mut p.pat),
            Pat::Range(p) => {
                if let Some(e) = &mut p.start {
                    self.visit_expr_mut(e);
                }
                if let Some(e) = &mut p.end {
                    self.visit_expr_mut(e);
                }
            }
            _ => {}
        }
    }

    /// A struct pattern's field; shorthand `S { x }` becomes `S { x: _N }`
    /// so the field keeps its name while the binding is renamed.
    fn bind_field(&mut self, field: &mut FieldPat) {
        self.bind_inner(&mut field.pat);
        if field.colon_token.is_none() {
            field.colon_token = Some(Default::default());
        }
    }

    fn rename_macro_tokens(&self, tokens: TokenStream) -> TokenStream {
        let mut out = Vec::new();
        let mut after_dot = false;
        for tree in tokens {
            let renamed = match tree {
                TokenTree::Ident(ref ident) if !after_dot => {
                    match self.lookup(&ident.to_string()) {
                        Some(pos) => TokenTree::Ident(Ident::new(&local_name(pos), ident.span())),
                        None => tree,
                    }
                }
                TokenTree::Group(ref g) => {
                    let mut ng = proc_macro2::Group::new(
                        g.delimiter(),
                        self.rename_macro_tokens(g.stream()),
                    );
                    ng.set_span(g.span());
                    TokenTree::Group(ng)
                }
                TokenTree::Literal(ref lit) => self.rename_format_literal(lit).unwrap_or(tree),
                _ => tree,
            };
            after_dot = matches!(&renamed, TokenTree::Punct(p) if p.as_char() == '.');
            out.push(renamed);
        }
        out.into_iter().collect()
    }

    /// Renames implicit format arguments (`{x}`, `{x:?}`) inside a plain
    /// string literal; `None` when there is nothing to rename.
    fn rename_format_literal(&self, lit: &Literal) -> Option<TokenTree> {
        let text = lit.to_string();
        if !text.starts_with('"') || !text.contains('{') {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut changed = false;
        let mut rest = text.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..=open]);
            rest = &rest[open + 1..];
            if rest.starts_with('{') {
                out.push('{');
                rest = &rest[1..];
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            let closes = rest[end..].starts_with('}') || rest[end..].starts_with(':');
            match self.lookup(name).filter(|_| closes && !name.is_empty()) {
                Some(pos) => {
                    out.push_str(&local_name(pos));
                    changed = true;
                }
                None => out.push_str(name),
            }
            rest = &rest[end..];
        }
        out.push_str(rest);
        if !changed {
            return None;
        }
        let parsed: TokenStream = out.parse().ok()?;
        parsed.into_iter().next()
    }
}

impl VisitMut for Renamer {
    fn visit_item_fn_mut(&mut self, f: &mut syn::ItemFn) {
        self.in_function(|r| {
            for input in &mut f.sig.inputs {
                if let syn::FnArg::Typed(t) = input {
                    r.bind(&mut t.pat);
                }
            }
            r.visit_block_mut(&mut f.block);
        });
    }

    fn visit_impl_item_fn_mut(&mut self, f: &mut syn::ImplItemFn) {
        self.in_function(|r| {
            for input in &mut f.sig.inputs {
                if let syn::FnArg::Typed(t) = input {
                    r.bind(&mut t.pat);
                }
            }
            r.visit_block_mut(&mut f.block);
        });
    }

    fn visit_trait_item_fn_mut(&mut self, f: &mut syn::TraitItemFn) {
        self.in_function(|r| {
            for input in &mut f.sig.inputs {
                if let syn::FnArg::Typed(t) = input {
                    r.bind(&mut t.pat);
                }
            }
            if let Some(block) = &mut f.default {
                r.visit_block_mut(block);
            }
        });
    }

    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        // Items nested in a body cannot see its locals; functions reset
        // themselves, and consts or statics get no scope to rename from.
        match item {
            syn::Item::Fn(_) | syn::Item::Impl(_) | syn::Item::Trait(_) | syn::Item::Mod(_) => {
                visit_mut::visit_item_mut(self, item)
            }
            _ => {
                let scopes = std::mem::take(&mut self.scopes);
                visit_mut::visit_item_mut(self, item);
                self.scopes = scopes;
            }
        }
    }

    fn visit_block_mut(&mut self, block: &mut syn::Block) {
        self.in_scope(|r| visit_mut::visit_block_mut(r, block));
    }

    fn visit_local_mut(&mut self, local: &mut syn::Local) {
        // The initializer cannot see the names the pattern binds.
        if let Some(init) = &mut local.init {
            self.visit_expr_mut(&mut init.expr);
            if let Some((_, diverge)) = &mut init.diverge {
                self.visit_expr_mut(diverge);
            }
        }
        self.bind(&mut local.pat);
    }

    fn visit_expr_let_mut(&mut self, e: &mut syn::ExprLet) {
        self.visit_expr_mut(&mut e.expr);
        self.bind(&mut e.pat);
    }

    fn visit_expr_if_mut(&mut self, e: &mut syn::ExprIf) {
        // `if let` bindings are visible in the then-branch only.
        self.in_scope(|r| {
            r.visit_expr_mut(&mut e.cond);
            r.visit_block_mut(&mut e.then_branch);
        });
        if let Some((_, else_branch)) = &mut e.else_branch {
            self.visit_expr_mut(else_branch);
        }
    }

    fn visit_expr_while_mut(&mut self, e: &mut syn::ExprWhile) {
        self.in_scope(|r| {
            r.visit_expr_mut(&mut e.cond);
            r.visit_block_mut(&mut e.body);
        });
    }

    fn visit_expr_for_loop_mut(&mut self, e: &mut syn::ExprForLoop) {
        self.visit_expr_mut(&mut e.expr);
        self.in_scope(|r| {
            r.bind(&mut e.pat);
            r.visit_block_mut(&mut e.body);
        });
    }

    fn visit_arm_mut(&mut self, arm: &mut syn::Arm) {
        self.in_scope(|r| {
            r.bind(&mut arm.pat);
            if let Some((_, guard)) = &mut arm.guard {
                r.visit_expr_mut(guard);
            }
            r.visit_expr_mut(&mut arm.body);
        });
    }

    fn visit_expr_closure_mut(&mut self, e: &mut syn::ExprClosure) {
        self.in_scope(|r| {
            for input in &mut e.inputs {
                r.bind(input);
            }
            r.visit_expr_mut(&mut e.body);
        });
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::Path(p) = e {
            if p.qself.is_none() && p.path.leading_colon.is_none() && p.path.segments.len() == 1 {
                let seg = &mut p.path.segments[0];
                if seg.arguments.is_none() {
                    if let Some(pos) = self.lookup(&seg.ident.to_string()) {
                        seg.ident = Ident::new(&local_name(pos), seg.ident.span());
                    }
                }
                return;
            }
        }
        visit_mut::visit_expr_mut(self, e);
    }

    fn visit_field_value_mut(&mut self, field: &mut FieldValue) {
        self.visit_expr_mut(&mut field.expr);
        // Shorthand `S { x }` with `x` renamed must spell out the field.
        if field.colon_token.is_none() {
            if let (Member::Named(member), Expr::Path(p)) = (&field.member, &field.expr) {
                if !p.path.is_ident(member) {
                    field.colon_token = Some(Default::default());
                }
            }
        }
    }

    fn visit_macro_mut(&mut self, mac: &mut syn::Macro) {
        if !self.scopes.is_empty() {
            mac.tokens = self.rename_macro_tokens(std::mem::take(&mut mac.tokens));
        }
    }
}
