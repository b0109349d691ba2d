//! Standard output that survives a closed pipe.
//!
//! `troupe trace run.jsonl | head -1` closes the pipe after one line; std's `print!` would then
//! panic with "failed printing to stdout: Broken pipe". Every `print!`/`println!` in this binary
//! goes through [`write_stdout`] instead (`main.rs` shadows the two std macros), which ends the
//! program quietly with status 0 when the reader has gone away, as `cat` and `grep` do. Trace
//! file lines are written as spans close, so nothing already recorded is lost by exiting here.

use std::fmt;
use std::io::{self, Write};

/// Write `args` to stdout. A broken pipe exits the process with status 0; any other write error
/// is reported on stderr once per call and otherwise ignored (as `print!` callers expect).
pub fn write_stdout(args: fmt::Arguments<'_>) {
    let result = io::stdout().lock().write_fmt(args);
    if let Err(e) = result {
        if is_broken_pipe(&e) {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to stdout: {e}");
    }
}

/// Flush stdout (for prompts without a newline), with the same broken-pipe handling.
pub fn flush_stdout() {
    if let Err(e) = io::stdout().lock().flush() {
        if is_broken_pipe(&e) {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to stdout: {e}");
    }
}

fn is_broken_pipe(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
}
