//! Temporal expressions resolved against the time a message was said (SPEC §2.2, §7 "Temporal
//! anchors"): "yesterday" said at 1:56 pm on 8 May 2023 is 7 May 2023.

use std::borrow::Cow;

use chrono::{Datelike, Duration, Months, NaiveDate, Weekday};
use serde::{Deserialize, Serialize};

use crate::lexicon::{MONTHS, NUMBER_WORDS, WEEKDAYS};
use crate::text::{norm_cow, words};

/// A relative time expression and what it means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    /// The expression, verbatim from the text.
    pub phrase: String,
    /// What it resolves to, for a reader: `7 May 2023`, `the week before 8 May 2023`, `April 2023`.
    pub resolved: String,
    /// First day it can mean.
    pub start: NaiveDate,
    /// Last day it can mean.
    pub end: NaiveDate,
}

/// Formats a date as `7 May 2023`.
pub fn fmt_day(d: NaiveDate) -> String {
    d.format("%-d %B %Y").to_string()
}

fn fmt_month(d: NaiveDate) -> String {
    d.format("%B %Y").to_string()
}

fn month_range(d: NaiveDate) -> (NaiveDate, NaiveDate) {
    let first = d.with_day(1).expect("day 1 exists");
    let next = first + Months::new(1);
    (first, next - Duration::days(1))
}

fn year_range(y: i32) -> Option<(NaiveDate, NaiveDate)> {
    Some((
        NaiveDate::from_ymd_opt(y, 1, 1)?,
        NaiveDate::from_ymd_opt(y, 12, 31)?,
    ))
}

fn number(word: &str) -> Option<i64> {
    word.parse::<i64>()
        .ok()
        .filter(|n| (1..=100).contains(n))
        .or_else(|| {
            NUMBER_WORDS
                .iter()
                .find(|(w, _)| *w == word)
                .map(|(_, n)| *n)
        })
}

fn weekday(word: &str) -> Option<Weekday> {
    let i = WEEKDAYS.iter().position(|w| *w == word)?;
    Some(Weekday::try_from(i as u8).expect("0..7 is a weekday"))
}

/// Finds and resolves the temporal expressions of `text`, said on `said`.
pub fn resolve(text: &str, said: NaiveDate) -> Vec<Anchor> {
    let toks = words(text);
    let lower: Vec<Cow<'_, str>> = toks.iter().map(|(_, w)| norm_cow(w)).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let at = |k: usize| lower.get(i + k).map(|w| &**w).unwrap_or("");
        let span = |len: usize| {
            let (s, _) = toks[i];
            let (e, w) = toks[i + len - 1];
            text[s..e + w.len()].to_string()
        };
        let mut push = |len: usize, resolved: String, start: NaiveDate, end: NaiveDate| {
            out.push(Anchor {
                phrase: span(len),
                resolved,
                start,
                end,
            });
            len
        };
        let consumed = match (at(0), at(1), at(2)) {
            ("today" | "tonight", _, _) => push(1, fmt_day(said), said, said),
            ("yesterday", _, _) => {
                let d = said - Duration::days(1);
                push(1, fmt_day(d), d, d)
            }
            ("tomorrow", _, _) => {
                let d = said + Duration::days(1);
                push(1, fmt_day(d), d, d)
            }
            ("last" | "past", "night", _) => {
                let d = said - Duration::days(1);
                push(2, fmt_day(d), d, d)
            }
            ("last", "week", _) => {
                let monday =
                    said - Duration::days(said.weekday().num_days_from_monday() as i64 + 7);
                push(
                    2,
                    format!("the week before {}", fmt_day(said)),
                    monday,
                    monday + Duration::days(6),
                )
            }
            ("next", "week", _) => {
                let monday =
                    said + Duration::days(7 - said.weekday().num_days_from_monday() as i64);
                push(
                    2,
                    format!("the week after {}", fmt_day(said)),
                    monday,
                    monday + Duration::days(6),
                )
            }
            ("last", "weekend", _) => {
                let back = (said.weekday().num_days_from_monday() as i64 + 2) % 7;
                let saturday = said - Duration::days(if back == 0 { 7 } else { back });
                push(
                    2,
                    format!("the weekend of {}", fmt_day(saturday)),
                    saturday,
                    saturday + Duration::days(1),
                )
            }
            ("this" | "next", "weekend", _) => {
                let ahead = (5 - said.weekday().num_days_from_monday() as i64).rem_euclid(7);
                let saturday = said
                    + Duration::days(if at(0) == "next" && ahead == 0 {
                        7
                    } else {
                        ahead
                    });
                push(
                    2,
                    format!("the weekend of {}", fmt_day(saturday)),
                    saturday,
                    saturday + Duration::days(1),
                )
            }
            ("last", w, _) if weekday(w).is_some() => {
                let target = weekday(w).expect("checked");
                let mut d = said - Duration::days(1);
                while d.weekday() != target {
                    d -= Duration::days(1);
                }
                push(2, fmt_day(d), d, d)
            }
            ("next", w, _) if weekday(w).is_some() => {
                let target = weekday(w).expect("checked");
                let mut d = said + Duration::days(1);
                while d.weekday() != target {
                    d += Duration::days(1);
                }
                push(2, fmt_day(d), d, d)
            }
            ("last", "month", _) => {
                let d = said - Months::new(1);
                let (s, e) = month_range(d);
                push(2, fmt_month(d), s, e)
            }
            ("next", "month", _) => {
                let d = said + Months::new(1);
                let (s, e) = month_range(d);
                push(2, fmt_month(d), s, e)
            }
            ("this", "month", _) => {
                let (s, e) = month_range(said);
                push(2, fmt_month(said), s, e)
            }
            ("last", "year", _) | ("next", "year", _) | ("this", "year", _) => {
                let y = said.year()
                    + match at(0) {
                        "last" => -1,
                        "next" => 1,
                        _ => 0,
                    };
                match year_range(y) {
                    Some((s, e)) => push(2, y.to_string(), s, e),
                    None => 1,
                }
            }
            ("a", "few" | "couple", unit)
                if matches!(at(3), "ago") || (unit == "of" && at(4) == "ago") =>
            {
                // "a few years ago", "a couple of weeks ago": kept fuzzy.
                let len = if unit == "of" { 5 } else { 4 };
                let unit = if unit == "of" {
                    at(3).to_string()
                } else {
                    unit.to_string()
                };
                let (s, e) = match unit.trim_end_matches('s') {
                    "day" => (said - Duration::days(6), said - Duration::days(2)),
                    "week" => (said - Duration::days(35), said - Duration::days(10)),
                    "month" => (said - Months::new(6), said - Months::new(2)),
                    "year" => (said - Months::new(72), said - Months::new(18)),
                    _ => {
                        i += 1;
                        continue;
                    }
                };
                push(
                    len,
                    format!(
                        "{} before {}",
                        span(len).trim_end_matches(" ago"),
                        fmt_day(said)
                    ),
                    s,
                    e,
                )
            }
            (n, unit, "ago") if number(n).is_some() => {
                let n = number(n).expect("checked");
                match unit.trim_end_matches('s') {
                    "day" => {
                        let d = said - Duration::days(n);
                        push(3, fmt_day(d), d, d)
                    }
                    "week" => {
                        let d = said - Duration::days(7 * n);
                        push(
                            3,
                            format!("the week of {}", fmt_day(d)),
                            d - Duration::days(3),
                            d + Duration::days(3),
                        )
                    }
                    "month" => {
                        let d = said - Months::new(n as u32);
                        let (s, e) = month_range(d);
                        push(3, fmt_month(d), s, e)
                    }
                    "year" => {
                        let y = said.year() - n as i32;
                        match year_range(y) {
                            Some((s, e)) => push(3, y.to_string(), s, e),
                            None => 1,
                        }
                    }
                    _ => 1,
                }
            }
            ("in" | "since" | "during", y, _)
                if y.len() == 4 && y.parse::<i32>().is_ok_and(|y| (1900..=2100).contains(&y)) =>
            {
                let y: i32 = y.parse().expect("checked");
                match year_range(y) {
                    Some((s, e)) => push(2, y.to_string(), s, e),
                    None => 1,
                }
            }
            ("in" | "last" | "this" | "next", m, _)
                if MONTHS.contains(&m) && m != "may" || (at(0) != "in" && m == "may") =>
            {
                let month = MONTHS.iter().position(|x| *x == m).expect("checked") as u32 + 1;
                let mut year = said.year();
                if at(0) == "last" && month >= said.month() {
                    year -= 1;
                }
                if at(0) == "next" && month <= said.month() {
                    year += 1;
                }
                match NaiveDate::from_ymd_opt(year, month, 1) {
                    Some(d) => {
                        let (s, e) = month_range(d);
                        push(2, fmt_month(d), s, e)
                    }
                    None => 1,
                }
            }
            _ => 1,
        };
        i += consumed.max(1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap()
    }

    fn one(text: &str, said: NaiveDate) -> (String, String, NaiveDate, NaiveDate) {
        let a = resolve(text, said);
        assert_eq!(a.len(), 1, "{text}: {a:?}");
        let a = a.into_iter().next().unwrap();
        (a.phrase, a.resolved, a.start, a.end)
    }

    #[test]
    fn locomo_examples() {
        // 8 May 2023 was a Monday.
        let said = d(2023, 5, 8);
        assert_eq!(
            one("I went to a support group yesterday.", said).1,
            "7 May 2023"
        );
        let (phrase, resolved, s, e) = one("We met last week at the park", said);
        assert_eq!(
            (phrase.as_str(), resolved.as_str()),
            ("last week", "the week before 8 May 2023")
        );
        assert_eq!((s, e), (d(2023, 5, 1), d(2023, 5, 7)));
        assert_eq!(one("I ran last Saturday", said).2, d(2023, 5, 6));
        assert_eq!(one("Last Monday was rough", said).2, d(2023, 5, 1));
        assert_eq!(one("I start next month", said).1, "June 2023");
        assert_eq!(one("I painted that two years ago", said).1, "2021");
        assert_eq!(one("I did it 3 days ago", said).1, "5 May 2023");
        assert_eq!(one("That was in 2022.", said).1, "2022");
        assert_eq!(one("We went camping last year", said).1, "2022");
        assert_eq!(one("We went camping last month", said).1, "April 2023");
        let fuzzy = one("I adopted him a few years ago", said);
        assert_eq!(fuzzy.0, "a few years ago");
        assert!(fuzzy.1.starts_with("a few years before 8 May 2023"));
        assert_eq!(one("Let's meet next Friday", said).2, d(2023, 5, 12));
        assert_eq!(one("We went in June", said).1, "June 2023");
        assert!(resolve("I may go", said).is_empty());
    }

    #[test]
    fn month_edges() {
        assert_eq!(one("last month", d(2024, 3, 31)).1, "February 2024");
        assert_eq!(one("next month", d(2023, 12, 15)).1, "January 2024");
        assert_eq!(one("last weekend", d(2023, 5, 8)).2, d(2023, 5, 6));
    }
}
