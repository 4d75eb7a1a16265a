//! Control-flow facts the verifier and the backend share: successors, reverse postorder and
//! dominators (Cooper, Harvey & Kennedy, "A Simple, Fast Dominance Algorithm").

use super::entity::SecondaryMap;
use super::{Block, Function, Op};

/// The blocks `block`'s terminator can branch to, in operand order (duplicates kept).
pub fn successors(func: &Function, block: Block) -> Vec<Block> {
    match func.terminator(block) {
        Some(op) => op.branch_targets().iter().map(|bc| bc.block).collect(),
        None => Vec::new(),
    }
}

/// Successor `k` of `block` (in operand order), without allocating.
pub fn successor(func: &Function, block: Block, k: usize) -> Option<Block> {
    match func.terminator(block)? {
        Op::Jump(bc) => (k == 0).then_some(bc.block),
        Op::Brif(_, t, e) => match k {
            0 => Some(t.block),
            1 => Some(e.block),
            _ => None,
        },
        Op::Switch(_, cases) => cases.get(k).map(|(_, bc)| bc.block),
        _ => None,
    }
}

/// Blocks reachable from the entry in reverse postorder: every block comes after its dominators.
/// Branches to blocks outside the layout are ignored.
pub fn reverse_postorder(func: &Function) -> Vec<Block> {
    let Some(entry) = func.entry() else { return Vec::new() };
    let in_layout = layout_set(func);
    let mut visited: SecondaryMap<Block, bool> = SecondaryMap::sized(func.blocks.len());
    let mut post = Vec::with_capacity(func.layout.len());
    // Iterative DFS: (block, next successor index).
    let mut stack: Vec<(Block, usize)> = Vec::new();
    visited[entry] = true;
    stack.push((entry, 0));
    while let Some((b, i)) = stack.last_mut() {
        match successor(func, *b, *i) {
            Some(s) => {
                *i += 1;
                if in_layout[s] && !visited[s] {
                    visited[s] = true;
                    stack.push((s, 0));
                }
            }
            None => {
                post.push(*b);
                stack.pop();
            }
        }
    }
    post.reverse();
    post
}

/// Which blocks are in the layout.
fn layout_set(func: &Function) -> SecondaryMap<Block, bool> {
    let mut set = SecondaryMap::sized(func.blocks.len());
    for &b in &func.layout {
        set[b] = true;
    }
    set
}

/// The dominator tree of the blocks reachable from the entry.
pub struct Dominators {
    /// Immediate dominator; the entry's is itself; unreachable blocks have none.
    idom: SecondaryMap<Block, Option<Block>>,
    /// Position in reverse postorder (for the intersection walk).
    rpo_index: SecondaryMap<Block, usize>,
}

impl Dominators {
    /// Computes dominators of `func`.
    pub fn compute(func: &Function) -> Dominators {
        let rpo = reverse_postorder(func);
        let mut rpo_index = SecondaryMap::with_default(usize::MAX);
        for (i, &b) in rpo.iter().enumerate() {
            rpo_index[b] = i;
        }
        let mut preds: SecondaryMap<Block, Vec<Block>> = SecondaryMap::sized(func.blocks.len());
        for &b in &rpo {
            let mut k = 0;
            while let Some(s) = successor(func, b, k) {
                k += 1;
                if rpo_index[s] != usize::MAX {
                    preds[s].push(b);
                }
            }
        }
        let mut idom: SecondaryMap<Block, Option<Block>> = SecondaryMap::sized(func.blocks.len());
        let Some(&entry) = rpo.first() else { return Dominators { idom, rpo_index } };
        idom[entry] = Some(entry);
        let mut changed = true;
        while changed {
            changed = false;
            for &b in rpo.iter().skip(1) {
                let mut new_idom: Option<Block> = None;
                for &p in &preds[b] {
                    if idom[p].is_none() {
                        continue;
                    }
                    new_idom = Some(match new_idom {
                        None => p,
                        Some(cur) => intersect(&idom, &rpo_index, p, cur),
                    });
                }
                if new_idom.is_some() && idom[b] != new_idom {
                    idom[b] = new_idom;
                    changed = true;
                }
            }
        }
        Dominators { idom, rpo_index }
    }

    /// Is `b` reachable from the entry?
    pub fn is_reachable(&self, b: Block) -> bool {
        self.idom[b].is_some()
    }

    /// The immediate dominator of `b` (the entry's is itself).
    pub fn idom(&self, b: Block) -> Option<Block> {
        self.idom[b]
    }

    /// Does `a` dominate `b` (every block dominates itself)? False if either is unreachable.
    pub fn dominates(&self, a: Block, mut b: Block) -> bool {
        if !self.is_reachable(a) || !self.is_reachable(b) {
            return false;
        }
        loop {
            if a == b {
                return true;
            }
            match self.idom[b] {
                Some(d) if d != b && self.rpo_index[d] >= self.rpo_index[a] => b = d,
                _ => return false,
            }
        }
    }
}

/// The nearest common dominator of `a` and `b` (both processed).
fn intersect(
    idom: &SecondaryMap<Block, Option<Block>>,
    rpo_index: &SecondaryMap<Block, usize>,
    mut a: Block,
    mut b: Block,
) -> Block {
    while a != b {
        while rpo_index[a] > rpo_index[b] {
            a = idom[a].unwrap_or(a);
        }
        while rpo_index[b] > rpo_index[a] {
            b = idom[b].unwrap_or(b);
        }
    }
    a
}
