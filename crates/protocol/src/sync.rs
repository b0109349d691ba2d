//! Locks that shrug off poisoning: the one place troupe decides what a poisoned lock means.
//!
//! A `std::sync` lock is poisoned when a thread panics while holding it. Everything troupe keeps
//! behind such a lock is plain data changed by single inserts, removes or assignments (checkpoint
//! maps, the agent directory, token caches, the file ledger, scripted replies, trace writers), so
//! a panic cannot leave it half-updated. Recovering the guard is therefore right: refusing it
//! would turn one panicking agent or tool into a wedged team, every later call panicking in turn.
//! A lock that guards an invariant a panic could break must not use these helpers.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, taking the guard back from a poisoned lock (see the module docs for why).
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks `rwlock`, taking the guard back from a poisoned lock (see the module docs for why).
pub fn read<T: ?Sized>(rwlock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    rwlock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `rwlock`, taking the guard back from a poisoned lock (see the module docs for why).
pub fn write<T: ?Sized>(rwlock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    rwlock.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Poisons `f`'s lock by panicking in another thread while it holds it.
    fn poison(f: impl FnOnce() + Send + 'static) {
        let joined = std::thread::spawn(f).join();
        assert!(joined.is_err(), "the poisoning thread must panic");
    }

    #[test]
    fn lock_recovers_a_poisoned_mutex_with_its_data() {
        let shared = Arc::new(Mutex::new(vec![1]));
        let held = Arc::clone(&shared);
        poison(move || {
            let mut guard = held.lock().unwrap();
            guard.push(2);
            panic!("poison the lock");
        });
        assert!(shared.is_poisoned());
        lock(&shared).push(3);
        assert_eq!(*lock(&shared), vec![1, 2, 3]);
    }

    #[test]
    fn read_and_write_recover_a_poisoned_rwlock_with_its_data() {
        let shared = Arc::new(RwLock::new(String::from("a")));
        let held = Arc::clone(&shared);
        poison(move || {
            let mut guard = held.write().unwrap();
            guard.push('b');
            panic!("poison the lock");
        });
        assert!(shared.is_poisoned());
        write(&shared).push('c');
        assert_eq!(*read(&shared), "abc");
    }
}
