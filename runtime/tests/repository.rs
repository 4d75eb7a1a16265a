//! The repository is self-contained: every `*.md` file that code, docs or examples cite exists
//! (relative to the repository's root or to the citing file's folder).

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !name.starts_with('.') && name != "target" {
                files(&p, out);
            }
        } else if [".rs", ".md", ".nbl", ".toml"].iter().any(|x| name.ends_with(x)) {
            out.push(p);
        }
    }
}

/// The Markdown documents cited in `text`, as written.
fn cited(text: &str) -> Vec<String> {
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut out = Vec::new();
    for (i, _) in text.match_indices(".md") {
        if text[i + 3..].chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) {
            continue;
        }
        let start = text[..i].rfind(|c: char| !path_char(c)).map_or(0, |j| j + 1);
        let name = &text[start..i + 3];
        // Web addresses are not files of the repository.
        if name.len() > 3 && !text[..start].ends_with("://") && !text[..start].ends_with('/') {
            out.push(name.to_string());
        }
    }
    out
}

#[test]
fn cited_documents_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut all = Vec::new();
    files(&root, &mut all);
    assert!(all.len() > 50, "found only {} files under {}", all.len(), root.display());
    let mut missing = Vec::new();
    for f in &all {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        for name in cited(&text) {
            let here = f.parent().unwrap_or(&root).join(&name);
            if !root.join(&name).exists() && !here.exists() {
                missing.push(format!("{}: `{name}`", f.strip_prefix(&root).unwrap_or(f).display()));
            }
        }
    }
    assert!(missing.is_empty(), "cited documents that are not in the repository:\n{}", missing.join("\n"));
}
