//! Every published schema compiles, names its command, and refuses a report of another shape.

mod common;

use switchyard_experiments::catalogue::{BENCHMARKS, REPRODUCTIONS};
use switchyard_experiments::report::{Report, Table, schema};

#[test]
fn every_schema_compiles_and_refuses_a_wrong_report() {
    for spec in REPRODUCTIONS.iter().chain(BENCHMARKS) {
        let s = schema(spec);
        let v = jsonschema::validator_for(&s).unwrap_or_else(|e| panic!("{}: schema does not compile: {e}", spec.name));
        // A report with the right name but each required table emptied of columns fails.
        let mut r = Report::new(spec);
        for t in spec.tables.iter().filter(|t| !t.open) {
            let mut table = Table::new(t);
            table.columns.clear();
            r.tables.push(table);
        }
        if spec.tables.iter().any(|t| !t.open && !t.columns.is_empty()) {
            assert!(!v.is_valid(&serde_json::to_value(&r).unwrap()), "{}: a table without columns passed", spec.name);
        }
        // A report of another command's name fails.
        r.name = "something-else".into();
        assert!(!v.is_valid(&serde_json::to_value(&r).unwrap()), "{}: a report of another name passed", spec.name);
    }
}

#[test]
fn names_are_unique() {
    let mut names: Vec<&str> = REPRODUCTIONS.iter().chain(BENCHMARKS).map(|s| s.name).collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n, "two specs share a name");
}
