//! One integration-test binary for the core (style.md, practice 15): golden vectors, property
//! tests of the placement policies, and the errors bad input gets.

mod by_flow_alone;
mod errors;
mod golden;
mod homes;
mod parsers;
mod properties;
mod shares;
