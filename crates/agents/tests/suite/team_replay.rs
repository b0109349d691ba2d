//! A team run on cassettes (troupe-models' record/replay, reached through `Team::builder()`):
//! `team` replays a whole team run, `compaction` the compressor's calls on an agent's cassette.

mod compaction;
mod team;
