#[test]
fn integration() { assert_eq!(rs::add(2, 2), 4); }
