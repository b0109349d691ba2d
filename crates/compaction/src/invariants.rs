//! What every compaction result is checked against before it is returned: [`validate`] (tool
//! calls paired with their results, the [`ProtectedSet`] byte-identical, tokens never increase,
//! every replaced message in the archive) and the pieces a caller can check on its own.

pub use crate::pairing::{owners as tool_call_owners, tool_name};
pub use crate::protection::{IdRange, ProtectedSet, ProtectionReason};
pub use crate::validate::{InvariantViolation, ValidationContext, check_invariants, validate};
