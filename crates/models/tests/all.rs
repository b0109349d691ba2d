//! troupe-models' integration suites (one binary; each file in `suite/` is one subject).

mod suite;
