//! Moving troupe's credentials out of its environment as it starts, so that the processes it
//! runs (the shell tool's commands, MCP servers) cannot read them from `/proc/$PPID/environ`;
//! the code that needs a key reads it from [`troupe::host::credentials`] instead.

use std::ffi::{OsStr, OsString};

use troupe::host::credentials;
use troupe::telemetry::redact::is_secret_name;
use troupe_cli::config::Config;

use crate::cli::{Cli, Command};

/// Move every credential out of the environment into [`credentials`], erase it from the initial
/// environment block, and make the process non-dumpable. A credential is a variable with a
/// credential's name ([`is_secret_name`]: `OPENAI_API_KEY`, `TROUPE_COOKIE`, `GITHUB_TOKEN`, …)
/// or one the command was told holds a key (`api_key_env` in its config, `--cookie-env`).
///
/// Must run before any thread is started (telemetry's exporter, the async runtime's workers):
/// `main` calls it first thing.
pub fn hide_credentials(cli: &Cli) {
    let mut named = named_by_the_command(cli);
    named.extend(
        std::env::vars_os()
            .map(|(name, _)| name)
            .filter(|name| name.to_str().is_some_and(is_secret_name)),
    );
    named.sort();
    named.dedup();
    let mut moved = Vec::new();
    for name in named {
        let Some(value) = std::env::var_os(&name) else {
            continue;
        };
        credentials::keep(name.clone(), value);
        remove_from_environment(&name);
        moved.push(name);
    }
    // Neither failure loses a key: the commands still run, only less shielded, and say so.
    if let Err(e) = credentials::erase_from_initial_environ(&moved) {
        eprintln!(
            "warning: credentials stay readable in /proc/{}/environ: {e}",
            std::process::id()
        );
    }
    if let Err(e) = credentials::forbid_inspection() {
        eprintln!("warning: cannot make troupe non-dumpable (PR_SET_DUMPABLE): {e}");
    }
}

/// The variables the command's options and config say hold credentials, whatever their names.
fn named_by_the_command(cli: &Cli) -> Vec<OsString> {
    let (config, key_envs): (_, &[String]) = match &cli.command {
        Command::Chat(args) => (args.config.as_deref(), &[]),
        Command::Node(args) => (
            args.config.as_deref(),
            std::slice::from_ref(&args.cookie_env),
        ),
        Command::A2a {
            command: crate::cli::A2aCommand::Serve(args),
        } => (args.config.as_deref(), &args.key_env),
        _ => (None, &[]),
    };
    let mut names: Vec<OsString> = key_envs.iter().map(OsString::from).collect();
    // `--store env:VAR`: a database URL may carry its password.
    let store = match &cli.command {
        Command::Node(args) => args.store.as_ref(),
        Command::Ui(args) => args.store.as_ref(),
        Command::Session {
            command: crate::cli::SessionCommand::Show(args),
        } => args.store.as_ref(),
        Command::Session {
            command: crate::cli::SessionCommand::Fork(args),
        } => args.store.as_ref(),
        _ => None,
    };
    names.extend(store.and_then(|s| s.env_var()).map(OsString::from));
    // A config that does not load is reported by the command itself, later.
    if let Some(config) = config.and_then(|path| Config::load(path).ok()) {
        names.extend(
            config
                .models
                .values()
                .filter_map(|model| model.api_key_env.as_deref())
                .map(OsString::from),
        );
    }
    names
}

/// Remove `name` from the process environment.
#[allow(unsafe_code)]
fn remove_from_environment(name: &OsStr) {
    // SAFETY: `remove_var` is unsafe because another thread could read or write the environment
    // at the same time. Only `hide_credentials` calls this, and `main` calls that before it
    // starts any thread (the async runtime, telemetry), while the process has one thread.
    unsafe { std::env::remove_var(name) }
}
