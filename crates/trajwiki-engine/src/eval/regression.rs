//! WikiTrace's regression measure (SPEC §4): given an agent's results on the same tasks without
//! memory and with it, the share of the tasks it solved without memory that it fails with it.
//!
//! A result file is JSON lines, one task each: `id` (a string or a number) and `success` (true or
//! false), or, without `success`, a `reward` (solved when it is 1). The runs files trajwiki ingests
//! are result files too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

/// A result file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line is not a task result.
    #[error("{path}: line {line}: {reason}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// Whether each task was solved, by task id.
pub fn read_results(path: &Path) -> Result<BTreeMap<String, bool>, ResultsError> {
    let text = std::fs::read_to_string(path).map_err(|source| ResultsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let fail = |reason: String| ResultsError::Line {
            path: path.to_path_buf(),
            line: i + 1,
            reason,
        };
        if line.trim().is_empty() {
            continue;
        }
        let value: Value =
            serde_json::from_str(line).map_err(|e| fail(format!("not JSON: {e}")))?;
        let id = match value.get("id") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => return Err(fail("field `id`: expected a string or a number".into())),
        };
        let solved = match (value.get("success"), value.get("reward")) {
            (Some(Value::Bool(b)), _) => *b,
            (None | Some(Value::Null), Some(Value::Number(r))) => {
                r.as_f64().is_some_and(|r| r >= 1.0)
            }
            _ => {
                return Err(fail(
                    "expected `success` (true or false) or a numeric `reward`".into(),
                ))
            }
        };
        if out.insert(id.clone(), solved).is_some() {
            return Err(fail(format!("task {id} appears twice")));
        }
    }
    Ok(out)
}

/// The comparison of two result files.
#[derive(Debug, Clone, Serialize)]
pub struct Regression {
    /// Tasks in both files.
    pub tasks: usize,
    /// Of those, solved without memory.
    pub solved_without: usize,
    /// Solved with memory.
    pub solved_with: usize,
    /// Solved without memory and failed with it.
    pub regressed: usize,
    /// Failed without memory and solved with it.
    pub improved: usize,
    /// `regressed / solved_without` (0 when nothing was solved without memory).
    pub regression: f64,
    /// Tasks in one file only (ignored), with the file they are in.
    pub unmatched: Vec<(String, &'static str)>,
    /// The tasks that regressed.
    pub regressed_tasks: Vec<String>,
}

/// Compares the results without memory (`base`) and with it (`with`).
pub fn regression(base: &BTreeMap<String, bool>, with: &BTreeMap<String, bool>) -> Regression {
    let mut r = Regression {
        tasks: 0,
        solved_without: 0,
        solved_with: 0,
        regressed: 0,
        improved: 0,
        regression: 0.0,
        unmatched: Vec::new(),
        regressed_tasks: Vec::new(),
    };
    for (id, &before) in base {
        let Some(&after) = with.get(id) else {
            r.unmatched.push((id.clone(), "base"));
            continue;
        };
        r.tasks += 1;
        r.solved_without += usize::from(before);
        r.solved_with += usize::from(after);
        if before && !after {
            r.regressed += 1;
            r.regressed_tasks.push(id.clone());
        }
        r.improved += usize::from(!before && after);
    }
    r.unmatched.extend(
        with.keys()
            .filter(|id| !base.contains_key(*id))
            .map(|id| (id.clone(), "with")),
    );
    if r.solved_without > 0 {
        r.regression = r.regressed as f64 / r.solved_without as f64;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_is_the_share_of_solved_tasks_lost() {
        let map = |pairs: &[(&str, bool)]| -> BTreeMap<String, bool> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        // Solved without memory: a, b, c, d (4); with memory a and c fail: 2 / 4. e improves;
        // f is only in the base file, g only in the other.
        let base = map(&[
            ("a", true),
            ("b", true),
            ("c", true),
            ("d", true),
            ("e", false),
            ("f", true),
        ]);
        let with = map(&[
            ("a", false),
            ("b", true),
            ("c", false),
            ("d", true),
            ("e", true),
            ("g", true),
        ]);
        let r = regression(&base, &with);
        assert_eq!((r.tasks, r.solved_without, r.solved_with), (5, 4, 3));
        assert_eq!((r.regressed, r.improved), (2, 1));
        assert_eq!(r.regression, 0.5);
        assert_eq!(r.regressed_tasks, ["a", "c"]);
        assert_eq!(
            r.unmatched,
            [("f".to_string(), "base"), ("g".to_string(), "with")]
        );
        assert_eq!(
            regression(&map(&[("a", false)]), &map(&[("a", false)])).regression,
            0.0
        );
    }
}
