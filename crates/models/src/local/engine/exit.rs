//! The process may exit while a worker decodes: llama.cpp must be left before it is torn down.
//!
//! `exit` runs the C++ static destructors of llama.cpp and ggml (the CPU backend's buffer types,
//! its registry) while the inference threads run on; a thread inside `llama_decode` at that
//! moment reads freed memory and the process dies of SIGSEGV after its work was done (a test
//! binary whose last test used the local model did, with every test passed). So every call into
//! llama.cpp that uses that state runs inside [`inside_llama`], and an `atexit` handler, registered
//! once after the first such call has returned, waits for the calls in progress to end and lets no
//! new one start. Handlers run in the reverse order of registration, so it runs before the
//! destructors that the first call registered (function-local statics register theirs when they
//! are first built, during that call).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, RwLock};
use std::time::{Duration, Instant};

/// Held shared by each call into llama.cpp; taken exclusively, for good, at exit.
static LLAMA: RwLock<()> = RwLock::new(());

/// Set at exit: no call starts after it.
static EXITING: AtomicBool = AtomicBool::new(false);

/// How long exit waits for a decode in progress (one batch: well under a second here, a few on a
/// loaded machine). Past it the process exits anyway: a hung decode must not hang the exit.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// Run `call` (a decode, a context's creation) unless the process is exiting; once it is, the
/// calling thread waits here until the process is gone.
pub(super) fn inside_llama<T>(call: impl FnOnce() -> T) -> T {
    while EXITING.load(Ordering::Acquire) {
        std::thread::park();
    }
    let result = {
        // A poisoned lock only means a call panicked (the worker catches that): the gate is
        // still right.
        let _inside = LLAMA
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        call()
    };
    static REGISTER: Once = Once::new();
    REGISTER.call_once(register);
    result
}

fn register() {
    // SAFETY: `atexit` only stores the pointer; `leave_llama` is an `extern "C"` function of
    // the right signature that cannot unwind (it polls a lock, sleeps and returns).
    #[allow(unsafe_code)]
    let _ = unsafe { libc::atexit(leave_llama) };
}

/// The `atexit` handler: let no call start, wait for those in progress, keep the gate shut.
extern "C" fn leave_llama() {
    EXITING.store(true, Ordering::Release);
    let deadline = Instant::now() + EXIT_WAIT;
    loop {
        match LLAMA.try_write() {
            Ok(shut) => {
                // Never opened again: a worker that would decode waits until the process ends.
                std::mem::forget(shut);
                return;
            }
            Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                std::mem::forget(poisoned.into_inner());
                return;
            }
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(std::sync::TryLockError::WouldBlock) => return,
        }
    }
}
