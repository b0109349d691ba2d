//! `--store`: where a command's session logs live — JSONL files in a directory, or a Postgres
//! database every node of a cluster reaches (`postgres://user@host:port/db`; `env:VAR` names a
//! variable holding that URL, so a password is never an argument, as the cookie is not).
//! `troupe node` keeps each agent's log there; `troupe session` and `troupe ui --session`
//! read a log from there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use troupe::session::{PostgresOptions, SessionStore};

/// A `--store` as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreArg {
    /// JSONL files under this directory.
    Files(PathBuf),
    /// A Postgres database: its URL.
    Postgres(String),
    /// A Postgres database whose URL this environment variable holds.
    PostgresEnv(String),
}

/// Read a `--store` value (clap's value parser).
pub fn parse_store(text: &str) -> Result<StoreArg, String> {
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        return Ok(StoreArg::Postgres(text.to_string()));
    }
    if let Some(var) = text.strip_prefix("env:") {
        if var.is_empty() {
            return Err("`env:` needs the name of a variable holding a postgres:// URL".into());
        }
        return Ok(StoreArg::PostgresEnv(var.to_string()));
    }
    if text.contains("://") {
        return Err(format!(
            "`{}` is not a store: give a directory, a postgres:// URL or env:VAR",
            text.split("://").next().unwrap_or_default()
        ));
    }
    if text.is_empty() {
        return Err("give a directory, a postgres:// URL or env:VAR".into());
    }
    Ok(StoreArg::Files(PathBuf::from(text)))
}

impl StoreArg {
    /// The variable this store's URL is read from, when one is named (a credential: hidden
    /// from the processes troupe runs, as every credential is).
    pub fn env_var(&self) -> Option<&str> {
        match self {
            StoreArg::PostgresEnv(var) => Some(var),
            _ => None,
        }
    }

    /// Open the store, `node` naming this process to the others in a shared one.
    pub fn open(&self, node: &str, lease: Option<Duration>) -> anyhow::Result<SessionStore> {
        let url = match self {
            StoreArg::Files(_) => return Ok(SessionStore::files()),
            StoreArg::Postgres(url) => url.clone(),
            StoreArg::PostgresEnv(var) => troupe::host::credentials::var(var)
                .filter(|url| !url.is_empty())
                .with_context(|| format!("--store env:{var}: ${var} is unset or empty"))?,
        };
        let mut options = PostgresOptions::default().node(node);
        if let Some(lease) = lease {
            options = options.lease(lease);
        }
        Ok(SessionStore::postgres(&url, options)?)
    }

    /// The log named `log` in this store: a path under the directory for files, the name
    /// itself in a database.
    pub fn log(&self, log: &Path) -> PathBuf {
        match self {
            StoreArg::Files(dir) => dir.join(log),
            StoreArg::Postgres(_) | StoreArg::PostgresEnv(_) => log.to_path_buf(),
        }
    }

    /// Agent `agent`'s log in this store (`troupe node`): `DIR/AGENT.jsonl`, or `AGENT`.
    pub fn agent_log(&self, agent: &str) -> PathBuf {
        match self {
            StoreArg::Files(dir) => dir.join(format!("{agent}.jsonl")),
            StoreArg::Postgres(_) | StoreArg::PostgresEnv(_) => PathBuf::from(agent),
        }
    }
}

/// The store a command reads a log from: `--store`'s, else files (the log a path).
pub fn open_or_files(
    store: Option<&StoreArg>,
    log: &Path,
) -> anyhow::Result<(SessionStore, PathBuf)> {
    match store {
        None => Ok((SessionStore::files(), log.to_path_buf())),
        Some(store) => Ok((
            store.open(&format!("troupe {}", std::process::id()), None)?,
            store.log(log),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_a_directory_a_postgres_url_or_a_variable_holding_one() {
        assert_eq!(parse_store("logs"), Ok(StoreArg::Files("logs".into())));
        assert_eq!(
            parse_store("postgres://troupe@127.0.0.1:5432/db"),
            Ok(StoreArg::Postgres(
                "postgres://troupe@127.0.0.1:5432/db".into()
            ))
        );
        assert_eq!(
            parse_store("env:PG_URL"),
            Ok(StoreArg::PostgresEnv("PG_URL".into()))
        );
        assert!(
            parse_store("env:")
                .unwrap_err()
                .contains("name of a variable")
        );
        assert!(
            parse_store("mysql://x")
                .unwrap_err()
                .contains("`mysql` is not a store")
        );
        assert!(parse_store("").is_err());
    }

    #[test]
    fn an_agents_log_is_named_by_the_agent_in_its_store() {
        let files = StoreArg::Files("logs".into());
        assert_eq!(
            files.agent_log("helper"),
            PathBuf::from("logs/helper.jsonl")
        );
        assert_eq!(
            files.log(Path::new("a.jsonl")),
            PathBuf::from("logs/a.jsonl")
        );
        let pg = StoreArg::Postgres("postgres://h/db".into());
        assert_eq!(pg.agent_log("helper"), PathBuf::from("helper"));
        assert_eq!(pg.log(Path::new("helper")), PathBuf::from("helper"));
    }
}
