//! The README's examples stay true: its config file parses and validates.

#[test]
fn the_readme_config_example_parses() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("```toml\n")
        .expect("a toml block in the README")
        + "```toml\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let config = troupe_cli::config::Config::parse(&readme[start..end]).unwrap();
    assert!(config.agents.contains_key("coder"));
    assert!(config.models.contains_key("local"));
}
