//! Reading one JSON object out of a model's reply, which in JSON mode (or from a weak model) may
//! wrap it in a code fence or in prose.

use serde_json::{Map, Value};

/// The JSON object in `reply`: the whole reply when it is one, else the first balanced `{…}` in
/// it that parses as an object (code fences and prose around it are skipped).
pub fn extract_json(reply: &str) -> Result<Map<String, Value>, String> {
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(reply.trim()) {
        return Ok(map);
    }
    let bytes = reply.as_bytes();
    let mut start = 0;
    while let Some(offset) = reply[start..].find('{') {
        let open = start + offset;
        if let Some(close) = matching_brace(bytes, open) {
            if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&reply[open..=close]) {
                return Ok(map);
            }
        }
        start = open + 1;
    }
    Err("no JSON object in the reply".into())
}

/// The index of the `}` that closes the `{` at `open`, skipping braces inside strings.
fn matching_brace(bytes: &[u8], open: usize) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_found_in_fences_and_prose() {
        let get = |s: &str| extract_json(s).map(|m| Value::Object(m).to_string());
        assert_eq!(get(r#"{"a": 1}"#).unwrap(), r#"{"a":1}"#);
        assert_eq!(
            get("```json\n{\"a\": \"}{\"}\n```").unwrap(),
            r#"{"a":"}{"}"#
        );
        assert_eq!(
            get(r#"Sure! Here it is: {"a": {"b": [1, "x\"}"]}} Hope this helps {"#).unwrap(),
            r#"{"a":{"b":[1,"x\"}"]}}"#
        );
        // A broken first candidate, a good second one.
        assert_eq!(
            get(r#"{oops} then {"ok": true}"#).unwrap(),
            r#"{"ok":true}"#
        );
        assert!(get("[1, 2]").is_err());
        assert!(get(r#"{"a": 1"#).is_err());
        assert!(get("").is_err());
    }
}
