//! troupe facade
