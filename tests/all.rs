//! The facade's integration tests: one binary, one module per area.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;

/// Four tests at once at least, not one per core: most tests here wait on the processes they
/// start (troupe, servers, a browser) rather than compute. On the two-core machine the suite took
/// 206 s at two threads and 116 s at four, at the same load. `--test-threads` and a
/// `RUST_TEST_THREADS` of the caller's still decide.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod threads {
    /// Runs before `main`, while the process has one thread, so setting the variable is sound.
    #[used]
    #[unsafe(link_section = ".init_array")]
    static AT_START: extern "C" fn() = at_start;

    extern "C" fn at_start() {
        if std::env::var_os("RUST_TEST_THREADS").is_none() {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            // SAFETY: no other thread exists yet (see above), so nothing reads the environment
            // while it changes.
            unsafe { std::env::set_var("RUST_TEST_THREADS", cores.max(4).to_string()) };
        }
    }
}
