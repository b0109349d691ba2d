mod corpus_round_trip;
mod supervisor;
mod support;
mod wire_round_trip;
