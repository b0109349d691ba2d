//! The schema walk that names and writes the grammar's rules, ported from llama.cpp's
//! `common_chat_schema_converter` (`common/json-schema-to-grammar.cpp`): rule names (`root`,
//! `<property>-kv`, `<name>-item`, `ref-...`, a counter on a clash), their order (sorted, as
//! its `std::map`) and their text follow it exactly.

use std::collections::{BTreeMap, HashSet};

use super::SchemaGrammarError;
use super::json_text::dump;
use super::primitives::{
    BuiltinRule, SPACE_RULE, format_literal, is_reserved_name, primitive, rule_name, string_format,
};
use super::ranges::{min_max_int, repetition};
use super::schema::{Document, Node, StringFormat};

/// The rules built so far. Rule text is bytes: a `pattern` may split a UTF-8 character (see
/// `pattern.rs`); the whole grammar is checked to be UTF-8 when it is written out.
pub(super) struct Converter {
    pub(super) rules: BTreeMap<String, Vec<u8>>,
    refs_being_resolved: HashSet<String>,
    /// The `allOf` nodes being visited (by address), each with how many `$ref`s were being
    /// resolved when it was entered: see [`Converter::visit_all_of`].
    all_of_stack: Vec<(usize, usize)>,
}

/// `name-` or nothing, the prefix of a child's rule name.
fn prefix(name: &str) -> String {
    if name.is_empty() {
        String::new()
    } else {
        format!("{name}-")
    }
}

impl Converter {
    pub(super) fn new() -> Self {
        let mut rules = BTreeMap::new();
        rules.insert("space".to_string(), SPACE_RULE.as_bytes().to_vec());
        Self {
            rules,
            refs_being_resolved: HashSet::new(),
            all_of_stack: Vec::new(),
        }
    }

    /// Add `rule` under `name` made a rule name; a different rule already there gets the new
    /// one a numbered name (`name0`, `name1`, ...). Returns the name used.
    pub(super) fn add_rule(&mut self, name: &str, rule: Vec<u8>) -> String {
        let esc_name = rule_name(name);
        if self
            .rules
            .get(&esc_name)
            .is_none_or(|existing| *existing == rule)
        {
            self.rules.insert(esc_name.clone(), rule);
            return esc_name;
        }
        let mut i = 0;
        while self
            .rules
            .get(&format!("{esc_name}{i}"))
            .is_some_and(|existing| *existing != rule)
        {
            i += 1;
        }
        let key = format!("{esc_name}{i}");
        self.rules.insert(key.clone(), rule);
        key
    }

    /// Add the built-in rule `rule` under `name`, and the built-ins it refers to.
    pub(super) fn add_primitive(
        &mut self,
        name: &str,
        rule: Option<&BuiltinRule>,
    ) -> Result<String, SchemaGrammarError> {
        let rule = rule.ok_or_else(|| SchemaGrammarError::UnknownRule(name.to_string()))?;
        let n = self.add_rule(name, rule.content.as_bytes().to_vec());
        for dep in rule.deps {
            let dep_rule = primitive(dep).or_else(|| string_format(dep));
            if dep_rule.is_none() {
                return Err(SchemaGrammarError::UnknownRule((*dep).to_string()));
            }
            if !self.rules.contains_key(*dep) {
                self.add_primitive(dep, dep_rule)?;
            }
        }
        Ok(n)
    }

    fn visit_primitive(
        &mut self,
        rule_name: &str,
        kind: &str,
    ) -> Result<String, SchemaGrammarError> {
        let name = if rule_name == "root" { "root" } else { kind };
        self.add_primitive(name, primitive(kind))
    }

    /// The grammar text: one `name ::= rule` line per rule, in name order.
    pub(super) fn format_grammar(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, rule) in &self.rules {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b" ::= ");
            out.extend_from_slice(rule);
            out.push(b'\n');
        }
        out
    }

    /// The rule for `node`, named after `name` (`""` is the root); returns the rule's name.
    pub(super) fn visit(
        &mut self,
        doc: &Document,
        node: &Node,
        name: &str,
    ) -> Result<String, SchemaGrammarError> {
        let rule_name = if is_reserved_name(name) {
            format!("{name}-")
        } else if name.is_empty() {
            "root".to_string()
        } else {
            name.to_string()
        };
        let sub_name = prefix(name);
        match node {
            Node::Ref(reference) => {
                let rule = self.resolve_ref(doc, reference)?;
                Ok(self.add_rule(&rule_name, rule.into_bytes()))
            }
            Node::AnyOf(alternatives) => {
                let rule = self.union_rule(doc, name, alternatives)?;
                Ok(self.add_rule(&rule_name, rule.into_bytes()))
            }
            Node::AllOf(children) => self.visit_all_of(doc, children, name, &rule_name),
            Node::Const(value) => Ok(self.add_rule(&rule_name, constant_rule(value).into_bytes())),
            Node::Enum(values) => {
                let alternatives: Vec<String> = values.iter().map(constant_rule).collect();
                let rule = format!("({})", alternatives.join(" | "));
                Ok(self.add_rule(&rule_name, rule.into_bytes()))
            }
            Node::Object {
                properties,
                additional,
            } => {
                if properties.is_empty() && matches!(additional.as_deref(), Some(Node::Any)) {
                    let object = self.add_primitive("object", primitive("object"))?;
                    return Ok(self.add_rule(&rule_name, object.into_bytes()));
                }
                let props: Vec<(&str, &Node)> = properties
                    .iter()
                    .map(|p| (p.name.as_str(), &p.schema))
                    .collect();
                let required: HashSet<&str> = properties
                    .iter()
                    .filter(|p| p.required)
                    .map(|p| p.name.as_str())
                    .collect();
                let rule =
                    self.build_object_rule(doc, &props, &required, name, additional.as_deref())?;
                Ok(self.add_rule(&rule_name, rule.into_bytes()))
            }
            Node::Tuple(items) => {
                let mut rule = String::from("\"[\" space ");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        rule.push_str(" \",\" space ");
                    }
                    rule.push_str(&self.visit(doc, item, &format!("{sub_name}tuple-{i}"))?);
                }
                rule.push_str(" space \"]\"");
                Ok(self.add_rule(&rule_name, rule.into_bytes()))
            }
            Node::Array {
                items,
                min_items,
                max_items,
            } => {
                if matches!(**items, Node::Any) && *min_items == 0 && *max_items < 0 {
                    return self.visit_primitive(&rule_name, "array");
                }
                let item = self.visit(doc, items, &format!("{sub_name}item"))?;
                let max = if *max_items < 0 { i32::MAX } else { *max_items };
                let rule = format!(
                    "\"[\" space {} space \"]\"",
                    repetition(&item, *min_items, max, "\",\" space")
                );
                Ok(self.add_rule(&rule_name, rule.into_bytes()))
            }
            Node::String {
                pattern,
                format,
                min_length,
                max_length,
            } => {
                if !pattern.is_empty() {
                    return self.visit_pattern(pattern, &rule_name);
                }
                let format_rule = match format {
                    StringFormat::None => None,
                    StringFormat::Uuid => return self.visit_primitive(&rule_name, "uuid"),
                    StringFormat::Date => Some("date-string"),
                    StringFormat::Time => Some("time-string"),
                    StringFormat::DateTime => Some("date-time-string"),
                };
                if let Some(prim_name) = format_rule {
                    let prim = self.add_primitive(prim_name, string_format(prim_name))?;
                    return Ok(self.add_rule(&rule_name, prim.into_bytes()));
                }
                if *min_length > 0 || *max_length >= 0 {
                    let char_rule = self.add_primitive("char", primitive("char"))?;
                    let max = if *max_length < 0 {
                        i32::MAX
                    } else {
                        *max_length
                    };
                    let rule = format!(
                        "\"\\\"\" {} \"\\\"\"",
                        repetition(&char_rule, *min_length, max, "")
                    );
                    return Ok(self.add_rule(&rule_name, rule.into_bytes()));
                }
                self.visit_primitive(&rule_name, "string")
            }
            Node::Integer { minimum, maximum } => {
                if *minimum == i64::MIN && *maximum == i64::MAX {
                    return self.visit_primitive(&rule_name, "integer");
                }
                let mut rule = String::from("(");
                min_max_int(*minimum, *maximum, &mut rule)?;
                rule.push(')');
                Ok(self.add_rule(&rule_name, rule.into_bytes()))
            }
            Node::Number => self.visit_primitive(&rule_name, "number"),
            Node::Boolean => self.visit_primitive(&rule_name, "boolean"),
            Node::Null => self.visit_primitive(&rule_name, "null"),
            Node::Any => {
                let value = self.add_primitive("value", primitive("value"))?;
                Ok(self.add_rule(&rule_name, value.into_bytes()))
            }
        }
    }

    fn union_rule(
        &mut self,
        doc: &Document,
        name: &str,
        alternatives: &[Node],
    ) -> Result<String, SchemaGrammarError> {
        let mut rules = Vec::with_capacity(alternatives.len());
        for (i, alternative) in alternatives.iter().enumerate() {
            let sep = if name.is_empty() { "alternative-" } else { "-" };
            rules.push(self.visit(doc, alternative, &format!("{name}{sep}{i}"))?);
        }
        Ok(rules.join(" | "))
    }

    /// `allOf`: the objects' properties merged (an `anyOf` child's as optional), or the enum
    /// values every child allows.
    fn visit_all_of(
        &mut self,
        doc: &Document,
        children: &[Node],
        name: &str,
        rule_name: &str,
    ) -> Result<String, SchemaGrammarError> {
        // An `allOf` takes its members' properties without going through `$ref` resolution, so
        // one whose member's property leads back to it (`A: {properties: {p: {allOf: [{$ref:
        // A}]}}}`) with no `$ref` resolved on the way would be walked forever (llama.cpp's
        // converter overflows its stack there): refuse it instead.
        let key = (children.as_ptr() as usize, self.refs_being_resolved.len());
        if self.all_of_stack.contains(&key) {
            return Err(SchemaGrammarError::RefCycle(name.to_string()));
        }
        self.all_of_stack.push(key);
        let rule = self.all_of_rule(doc, children, name, rule_name);
        self.all_of_stack.pop();
        rule
    }

    fn all_of_rule(
        &mut self,
        doc: &Document,
        children: &[Node],
        name: &str,
        rule_name: &str,
    ) -> Result<String, SchemaGrammarError> {
        let mut merged = AllOf::default();
        for child in children {
            if let Node::AnyOf(alternatives) = child {
                for alternative in alternatives {
                    merged.add_component(doc, alternative, false, &mut Vec::new())?;
                }
            } else {
                merged.add_component(doc, child, true, &mut Vec::new())?;
            }
        }
        if !merged.enum_values.is_empty() {
            let intersection: Vec<&str> = merged
                .enum_values
                .iter()
                .filter(|(_, count)| **count == children.len())
                .map(|(value, _)| value.as_str())
                .collect();
            if !intersection.is_empty() {
                let rule = format!("({})", intersection.join(" | "));
                return Ok(self.add_rule(rule_name, rule.into_bytes()));
            }
        }
        let rule = self.build_object_rule(doc, &merged.properties, &merged.required, name, None)?;
        Ok(self.add_rule(rule_name, rule.into_bytes()))
    }

    /// The rule name a `$ref` stands for, visiting its target the first time.
    fn resolve_ref(
        &mut self,
        doc: &Document,
        reference: &str,
    ) -> Result<String, SchemaGrammarError> {
        let fragment = reference
            .find('#')
            .map_or(reference, |at| &reference[at + 1..]);
        let mut ref_name = format!("ref{}", rule_name(fragment));
        if !self.rules.contains_key(&ref_name) && !self.refs_being_resolved.contains(reference) {
            let Some(target) = doc.refs.get(reference) else {
                return Err(SchemaGrammarError::UnresolvedRef(reference.to_string()));
            };
            self.refs_being_resolved.insert(reference.to_string());
            ref_name = self.visit(doc, target, &ref_name)?;
            self.refs_being_resolved.remove(reference);
        }
        Ok(ref_name)
    }
}

/// What `allOf`'s children add up to.
#[derive(Default)]
struct AllOf<'d> {
    properties: Vec<(&'d str, &'d Node)>,
    required: HashSet<&'d str>,
    /// Each enum value's literal and how many children allow it, in literal order.
    enum_values: BTreeMap<String, usize>,
}

impl<'d> AllOf<'d> {
    /// Add `component`; `refs` are the `$ref`s followed to reach it. A `$ref` that comes back
    /// to itself through `$ref`s alone is refused (llama.cpp recurses until its stack overflows).
    fn add_component(
        &mut self,
        doc: &'d Document,
        component: &'d Node,
        is_required: bool,
        refs: &mut Vec<&'d str>,
    ) -> Result<(), SchemaGrammarError> {
        match component {
            Node::Ref(reference) => {
                if refs.contains(&reference.as_str()) {
                    return Err(SchemaGrammarError::RefCycle(reference.clone()));
                }
                if let Some(target) = doc.refs.get(reference) {
                    refs.push(reference);
                    self.add_component(doc, target, is_required, refs)?;
                }
            }
            Node::Object { properties, .. } => {
                for prop in properties {
                    self.properties.push((&prop.name, &prop.schema));
                    if is_required {
                        self.required.insert(&prop.name);
                    }
                }
            }
            Node::Enum(values) => {
                for value in values {
                    *self.enum_values.entry(constant_rule(value)).or_default() += 1;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// A `const` / `enum` value as a literal of its JSON text.
fn constant_rule(value: &serde_json::Value) -> String {
    format_literal(&dump(value))
}
