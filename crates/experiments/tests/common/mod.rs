//! Checks shared by the experiments' tests: a report is what its spec declares, survives JSON
//! unchanged, and its JSON passes the published schema.

#![allow(dead_code)]

use switchyard_experiments::report::{Report, ReportSpec, conforms, schema};

/// Panics with the first way `report` falls short of `spec` or of its schema.
pub(crate) fn assert_report(report: &Report, spec: &ReportSpec) {
    if let Err(e) = conforms(report, spec) {
        panic!("{} does not conform to its spec: {e}", spec.name);
    }
    let json = serde_json::to_value(report).expect("a report serialises");
    let back: Report = serde_json::from_value(json.clone()).expect("a report's JSON deserialises");
    assert_eq!(&back, report, "{}: the report changed through JSON", spec.name);
    let validator = jsonschema::validator_for(&schema(spec)).expect("the schema compiles");
    let errors: Vec<String> =
        validator.iter_errors(&json).map(|e| format!("{} at {}", e, e.instance_path())).take(5).collect();
    assert!(errors.is_empty(), "{}: the report's JSON fails its schema: {errors:#?}", spec.name);
}
