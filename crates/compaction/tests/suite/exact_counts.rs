//! The counter's o200k_base counts are tiktoken's own, on every text of the real corpus: its
//! split without the backtracking regex (`counter/o200k.rs`) must not move one token.

use serde_json::Value;
use troupe_tokens::{TiktokenCounter, TokenCounter};

use super::support::corpus_files;

/// Every string in a JSON value (message contents, tool-call arguments, ids, names).
fn strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

#[test]
fn every_corpus_text_counts_as_tiktoken_counts_it() {
    let Some(files) = corpus_files() else { return };
    let counter = TiktokenCounter::default();
    let tiktoken = tiktoken_rs::o200k_base_singleton();
    let (mut texts, mut tokens) = (0, 0);
    for path in files {
        let json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut all = Vec::new();
        strings(&json, &mut all);
        // Longer texts are counted in pieces of 64 KiB (a bound, not tiktoken's count).
        for text in all.into_iter().filter(|t| t.len() <= 64 * 1024) {
            let expected = tiktoken.encode_ordinary(text).len();
            assert_eq!(
                counter.count(text),
                expected,
                "{}: {text:?}",
                path.display()
            );
            texts += 1;
            tokens += expected;
        }
    }
    println!("{texts} texts, {tokens} tokens: the same counts");
    assert!(texts > 1_000);
}
