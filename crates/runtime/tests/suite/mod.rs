mod corpus_round_trip;
mod support;
mod supervisor;
