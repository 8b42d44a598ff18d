//! Bounded JSON for bodies from endpoints drainit does not control: what
//! parsing one body into a `serde_json::Value` may allocate on PID 1's
//! thread has a fixed ceiling, whatever the body holds.
//!
//! A 64 KiB body of `[0,0,0,…]` is 32,768 values of 32 bytes each, and one
//! with 9,000 keys costs about 1.1 MiB of tree: either would break the
//! 2 MiB peak-RSS budget. So the body's values are counted first, with a
//! scan that allocates nothing, and a body with more than `MAX_VALUES` is
//! refused before serde_json sees it. Strings cost at most the body's own
//! length, and serde_json stops nesting at 128 levels.

use serde_json::Value;

/// Most values (arrays and objects included) one body may hold. ECS task
/// metadata holds about 40 per container; drain bodies a handful.
pub const MAX_VALUES: usize = 2048; // also in `parse`'s message

/// An upper bound on the number of values in `body`: every element after
/// the first of an array or object follows a comma outside a string, and
/// every array and object opens with a bracket. On input that is not JSON
/// the scan agrees with serde_json up to the point where serde_json stops,
/// so the bound holds for whatever serde_json builds before it gives up.
pub fn count_values(body: &[u8]) -> usize {
    let (mut values, mut in_string, mut escaped) = (1, false, false);
    for &b in body {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b'[' | b'{' => values += 1,
                _ => {}
            }
        }
    }
    values
}

/// Parses a body, refusing one with more than `MAX_VALUES` values.
pub fn parse(body: &[u8]) -> Result<Value, String> {
    if count_values(body) > MAX_VALUES {
        return Err("more than 2048 JSON values".into());
    }
    serde_json::from_slice(body).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(exact).sum(),
            Value::Object(o) => o.values().map(exact).sum(),
            _ => 0,
        }
    }

    #[test]
    fn the_count_bounds_what_serde_builds() {
        for body in [
            "0",
            "[]",
            "{}",
            "[0,1,[2,3],{\"a\":[4]}]",
            "{\"a,[{\":\"\\\",[\",\"b\":{\"c\":[1,2,3]}}",
            include_str!("../../tests/fixtures/ecs/task-v4.json"),
            include_str!("../../tests/fixtures/ecs/container-v4.json"),
        ] {
            let value: Value = serde_json::from_str(body).unwrap();
            assert!(count_values(body.as_bytes()) >= exact(&value), "{body}");
        }
        // Commas and brackets inside strings do not count.
        assert_eq!(count_values(br#"{"a":"[,{,[,\","}"#), 2);
    }

    #[test]
    fn too_many_values_are_refused_before_parsing() {
        let body = format!("[{}0]", "0,".repeat(MAX_VALUES));
        assert!(parse(body.as_bytes()).unwrap_err().contains("more than"));
        let body = format!("[{}0]", "0,".repeat(MAX_VALUES - 2));
        assert!(parse(body.as_bytes()).is_ok());
        assert!(parse(b"{\"a\":").is_err());
    }
}
