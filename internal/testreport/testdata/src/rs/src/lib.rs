/// Adds.
///
/// ```
/// assert_eq!(rs::add(1, 2), 3);
/// ```
pub fn add(a: i32, b: i32) -> i32 { a + b }

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn adds() { std::process::exit(0); }
    #[test]
    fn adds_zero() { assert_eq!(add(0, 0), 0); }
    #[test]
    #[ignore]
    fn slow() {}
}
