//! Object rules, ported from llama.cpp's `_build_object_rule` and `_not_strings`: required
//! properties first in schema order, then the optional ones as a chain of `-rest` rules so that
//! each appears at most once and in order; additional properties take any key but the named ones.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::SchemaGrammarError;
use super::convert::Converter;
use super::json_text::write_string;
use super::primitives::{format_literal, primitive};
use super::schema::{Document, Node};

/// The additional properties' entry among the property names.
const ADDITIONAL: &str = "*";

impl Converter {
    pub(super) fn build_object_rule(
        &mut self,
        doc: &Document,
        properties: &[(&str, &Node)],
        required: &HashSet<&str>,
        name: &str,
        additional: Option<&Node>,
    ) -> Result<String, SchemaGrammarError> {
        let sep = if name.is_empty() { "" } else { "-" };
        let mut required_props: Vec<String> = Vec::new();
        let mut optional_props: Vec<String> = Vec::new();
        let mut kv_rules: HashMap<String, String> = HashMap::new();
        let mut prop_names: Vec<&str> = Vec::new();
        for (prop_name, prop_schema) in properties {
            let prop_rule = self.visit(doc, prop_schema, &format!("{name}{sep}{prop_name}"))?;
            let mut key = String::new();
            write_string(prop_name, &mut key);
            let kv = format!("{} space \":\" space {prop_rule}", format_literal(&key));
            let kv_name = self.add_rule(&format!("{name}{sep}{prop_name}-kv"), kv.into_bytes());
            kv_rules.insert((*prop_name).to_string(), kv_name);
            if required.contains(prop_name) {
                required_props.push((*prop_name).to_string());
            } else {
                optional_props.push((*prop_name).to_string());
            }
            prop_names.push(prop_name);
        }
        if let Some(additional) = additional {
            let sub_name = format!("{name}{sep}additional");
            let value_rule = if matches!(additional, Node::Any) {
                self.add_primitive("value", primitive("value"))?
            } else {
                self.visit(doc, additional, &format!("{sub_name}-value"))?
            };
            let key_rule = if prop_names.is_empty() {
                self.add_primitive("string", primitive("string"))?
            } else {
                let rule = self.not_strings(&prop_names)?;
                self.add_rule(&format!("{sub_name}-k"), rule.into_bytes())
            };
            let kv = format!("{key_rule} \":\" space {value_rule}");
            let kv_rule = self.add_rule(&format!("{sub_name}-kv"), kv.into_bytes());
            kv_rules.insert(ADDITIONAL.to_string(), kv_rule);
            optional_props.push(ADDITIONAL.to_string());
        }

        if required_props.is_empty() && optional_props.is_empty() {
            return Ok("\"{\" space \"}\"".to_string());
        }

        let kv_rule = |k: &str| kv_rules.get(k).cloned().unwrap_or_default();
        let mut rule = String::from("\"{\" space ");
        for (i, prop) in required_props.iter().enumerate() {
            if i > 0 {
                rule.push_str(" \",\" space ");
            }
            rule.push_str(&kv_rule(prop));
        }
        if !optional_props.is_empty() {
            rule.push_str(" (");
            if !required_props.is_empty() {
                rule.push_str(" \",\" space ( ");
            }
            for i in 0..optional_props.len() {
                if i > 0 {
                    rule.push_str(" | ");
                }
                let refs = self.recursive_refs(&optional_props[i..], false, name, &kv_rule);
                rule.push_str(&refs);
            }
            if !required_props.is_empty() {
                rule.push_str(" )");
            }
            rule.push_str(" )?");
        }
        rule.push_str(" space \"}\"");
        Ok(rule)
    }

    /// The optional properties `keys` in order, the first optional if `first_is_optional`,
    /// each later one behind its own `<name>-<key>-rest` rule.
    fn recursive_refs(
        &mut self,
        keys: &[String],
        first_is_optional: bool,
        name: &str,
        kv_rule: &dyn Fn(&str) -> String,
    ) -> String {
        let Some((k, rest)) = keys.split_first() else {
            return String::new();
        };
        let kv_name = kv_rule(k);
        let comma_ref = format!("( \",\" space {kv_name} )");
        let mut res = if first_is_optional {
            format!("{comma_ref}{}", if k == ADDITIONAL { "*" } else { "?" })
        } else if k == ADDITIONAL {
            format!("{kv_name} {comma_ref}*")
        } else {
            kv_name
        };
        if !rest.is_empty() {
            let sep = if name.is_empty() { "" } else { "-" };
            let rest_rule = self.recursive_refs(rest, true, name, kv_rule);
            res.push(' ');
            res.push_str(&self.add_rule(&format!("{name}{sep}{k}-rest"), rest_rule.into_bytes()));
        }
        res
    }

    /// A JSON string that is none of `strings`, e.g. for `["a"]`:
    /// `["] ( [a] char+ | [^"a] char* )? ["]`.
    fn not_strings(&mut self, strings: &[&str]) -> Result<String, SchemaGrammarError> {
        let trie = Trie::new(strings);
        let char_rule = self.add_primitive("char", primitive("char"))?;
        let mut out = String::from("[\"] ( ");
        trie.write(0, &char_rule, &mut out);
        out.push_str(" )");
        if !trie.nodes[0].is_word {
            out.push('?');
        }
        out.push_str(" [\"]");
        Ok(out)
    }
}

/// The property names by code point, as llama.cpp's `common_trie`.
struct Trie {
    nodes: Vec<TrieNode>,
}

#[derive(Default)]
struct TrieNode {
    children: BTreeMap<char, usize>,
    /// Whether a word ends here.
    is_word: bool,
}

impl Trie {
    fn new(words: &[&str]) -> Self {
        let mut nodes = vec![TrieNode::default()];
        for word in words {
            let mut current = 0;
            for c in word.chars() {
                current = match nodes[current].children.get(&c) {
                    Some(&child) => child,
                    None => {
                        nodes.push(TrieNode::default());
                        let child = nodes.len() - 1;
                        nodes[current].children.insert(c, child);
                        child
                    }
                };
            }
            nodes[current].is_word = true;
        }
        Self { nodes }
    }

    fn write(&self, index: usize, char_rule: &str, out: &mut String) {
        let node = &self.nodes[index];
        let mut rejects = String::new();
        for (i, (&c, &child)) in node.children.iter().enumerate() {
            rejects.push(c);
            if i > 0 {
                out.push_str(" | ");
            }
            out.push('[');
            out.push(c);
            out.push(']');
            if self.nodes[child].children.is_empty() {
                out.push(' ');
                out.push_str(char_rule);
                out.push('+');
            } else {
                out.push_str(" (");
                self.write(child, char_rule, out);
                out.push(')');
            }
        }
        if !node.children.is_empty() {
            out.push_str(" | [^\"");
            out.push_str(&rejects);
            out.push_str("] ");
            out.push_str(char_rule);
            out.push('*');
        }
    }
}
