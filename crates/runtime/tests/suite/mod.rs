mod corpus_round_trip;
mod session;
mod supervisor;
mod support;
mod wire_round_trip;
