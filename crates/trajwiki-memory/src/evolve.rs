//! Claim evolution within a trajectory (SPEC §2.4): each new claim becomes an ADD, a REVISE of an
//! earlier claim (which is then deprecated, not deleted) or, for withdrawals, a DEPRECATE of the
//! claim it withdraws followed by its own ADD. A new value of a slot (where someone lives, a
//! pet's name) and a withdrawal are decided before the judge, across trajectories, by the slot
//! model ([`crate::slots`], in the fold); the deterministic judge handles what is left: a
//! statement restated with another status and a plan carried out.

use trajwiki_core::ClaimStatus;

use crate::extract::{is_specific, ClaimDraft};
use crate::text::normalized;
use crate::{slots, MemoryConfig};

/// An earlier claim of the trajectory, as the judge sees it.
#[derive(Debug, Clone)]
pub struct EarlierClaim<'a> {
    /// Its draft (text, subject, facets, keywords).
    pub draft: &'a ClaimDraft,
    /// Its current status.
    pub status: ClaimStatus,
}

/// What to do with a new claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// A new claim.
    Add {
        /// Why.
        rationale: String,
    },
    /// The new claim replaces earlier claim `target` (an index into the candidates given).
    Revise {
        /// Index into the candidates.
        target: usize,
        /// Why.
        rationale: String,
    },
    /// The new claim says earlier claim `target` again: no new claim; the earlier one gains the
    /// new claim's source (by an op).
    Restated {
        /// Index into the candidates.
        target: usize,
        /// Why.
        rationale: String,
    },
    /// Earlier claim `target` is withdrawn; the new claim is added after.
    Deprecate {
        /// Index into the candidates.
        target: usize,
        /// Why.
        rationale: String,
    },
}

/// Decides how a new claim relates to the earlier claims of its trajectory. The deterministic
/// judge is here; the LLM judge implements the same trait.
pub trait ClaimJudge: Send + Sync {
    /// A name recorded with what it decided.
    fn name(&self) -> &str;
    /// `earlier` holds the trajectory's current (not deprecated) claims, oldest first.
    fn judge(&self, new: &ClaimDraft, earlier: &[EarlierClaim<'_>]) -> Judgement;
}

/// The offline judge.
#[derive(Debug, Clone, Default)]
pub struct DeterministicJudge {
    config: MemoryConfig,
}

impl DeterministicJudge {
    /// A judge with the given limits.
    pub fn new(config: MemoryConfig) -> Self {
        DeterministicJudge { config }
    }
}

fn body(text: &str) -> String {
    // The attribution ("Ann: ") is part of the claim; duplicates are judged on the whole text.
    normalized(text)
}

fn shared_specific(a: &ClaimDraft, b: &ClaimDraft) -> usize {
    a.keywords
        .intersection(&b.keywords)
        .filter(|k| is_specific(k))
        .count()
}

impl ClaimJudge for DeterministicJudge {
    fn name(&self) -> &str {
        "deterministic"
    }

    fn judge(&self, new: &ClaimDraft, earlier: &[EarlierClaim<'_>]) -> Judgement {
        let text = body(&new.text);
        // An exact duplicate whose status changed revises the earlier statement.
        if let Some((i, e)) = earlier
            .iter()
            .enumerate()
            .rev()
            .find(|(_, e)| body(&e.draft.text) == text)
        {
            if e.status != new.status {
                return Judgement::Revise {
                    target: i,
                    rationale: format!(
                        "restated as {} (was {})",
                        new.status.as_str(),
                        e.status.as_str()
                    ),
                };
            }
            return Judgement::Restated {
                target: i,
                rationale: "restated".into(),
            };
        }
        // The few earlier claims of the same subject sharing keywords, most overlap first, then
        // the most recent.
        let mut related: Vec<(usize, usize)> = earlier
            .iter()
            .enumerate()
            .filter(|(_, e)| e.draft.subject == new.subject)
            .map(|(i, e)| (i, shared_specific(new, e.draft)))
            .filter(|(_, n)| *n > 0)
            .collect();
        related.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        related.truncate(self.config.evolution_candidates);
        // A plan carried out: a plan (a claim the slot model reads as one) followed by a claim
        // telling of it as done, naming it well (its own words, not only its kind).
        let new_is_plan = slots::slot_of(&new.quote).is_some_and(|s| s.attribute == "plan");
        if new.status == ClaimStatus::Active && !new_is_plan && slots::tells_of_the_past(&new.quote)
        {
            let words = slots::plan_words(&new.quote);
            for &(i, _) in &related {
                let e = &earlier[i];
                let Some(plan) = slots::slot_of(&e.draft.quote)
                    .filter(|s| s.attribute == "plan")
                    .and_then(|s| s.value)
                else {
                    continue;
                };
                if slots::plan_score(&plan, &words) >= 3 && slots::carries_out(&plan, &new.quote) {
                    let named: Vec<&String> = words
                        .iter()
                        .filter(|w| plan.split(' ').any(|x| x == w.as_str()))
                        .collect();
                    return Judgement::Revise {
                        target: i,
                        rationale: format!(
                            "plan carried out: {}",
                            named
                                .iter()
                                .map(|w| w.as_str())
                                .collect::<Vec<_>>()
                                .join(" ")
                        ),
                    };
                }
            }
        }
        Judgement::Add {
            rationale: "new statement".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::keywords;
    use trajwiki_core::{Facet, MessageId, Namespace};

    fn draft(
        text: &str,
        facets: &[(&str, &str)],
        status: ClaimStatus,
        cancels: bool,
    ) -> ClaimDraft {
        ClaimDraft {
            text: format!("Tom: {text}"),
            quote: text.into(),
            source: MessageId::derive(&Namespace::new("t").unwrap(), text),
            subject: "tom".into(),
            status,
            facets: facets
                .iter()
                .map(|(t, v)| Facet {
                    tag: t.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            keywords: keywords(text),
            cancels,
            terms: Default::default(),
        }
    }

    #[test]
    fn revise_vs_add() {
        let j = DeterministicJudge::default();
        let lisbon = draft(
            "I live in Lisbon near the river",
            &[("home_city", "lisbon")],
            ClaimStatus::Active,
            false,
        );
        let earlier = [EarlierClaim {
            draft: &lisbon,
            status: ClaimStatus::Active,
        }];
        let porto = draft(
            "I live in Porto now near the river",
            &[("home_city", "porto")],
            ClaimStatus::Active,
            false,
        );
        // New values of a slot are the slot model's (the fold's), not the judge's.
        assert!(matches!(j.judge(&porto, &earlier), Judgement::Add { .. }));
        // Same facet value, or nothing in common: ADD.
        let again = draft(
            "I live in Lisbon by the river",
            &[("home_city", "lisbon")],
            ClaimStatus::Active,
            false,
        );
        assert!(matches!(j.judge(&again, &earlier), Judgement::Add { .. }));
        let other = draft("My calf hurts", &[], ClaimStatus::Active, false);
        assert!(matches!(j.judge(&other, &earlier), Judgement::Add { .. }));
        // Another subject never revises.
        let mut maya = porto.clone();
        maya.subject = "maya".into();
        assert!(matches!(j.judge(&maya, &earlier), Judgement::Add { .. }));
    }

    #[test]
    fn duplicates_and_withdrawals() {
        let j = DeterministicJudge::default();
        let plan = draft(
            "I will run the Lisbon marathon",
            &[],
            ClaimStatus::NeedsConfirmation,
            false,
        );
        let earlier = [EarlierClaim {
            draft: &plan,
            status: ClaimStatus::NeedsConfirmation,
        }];
        let done = draft(
            "I will run the Lisbon marathon",
            &[],
            ClaimStatus::Active,
            false,
        );
        assert!(matches!(
            j.judge(&done, &earlier),
            Judgement::Revise { target: 0, .. }
        ));
        let cancel = draft(
            "I cancelled the Lisbon marathon",
            &[],
            ClaimStatus::Active,
            true,
        );
        // The same statement again: a source for the earlier claim, not a claim of its own.
        let again = draft(
            "I will run the Lisbon marathon",
            &[],
            ClaimStatus::NeedsConfirmation,
            false,
        );
        assert!(matches!(
            j.judge(&again, &earlier),
            Judgement::Restated { target: 0, .. }
        ));
        // Withdrawals are the slot model's.
        assert!(matches!(j.judge(&cancel, &earlier), Judgement::Add { .. }));
    }

    #[test]
    fn plans_and_multi_valued_facets() {
        let j = DeterministicJudge::default();
        let mut plan = draft(
            "I'm planning to join a pottery class",
            &[],
            ClaimStatus::NeedsConfirmation,
            false,
        );
        plan.terms = ["pottery class".to_string()].into();
        let earlier = [EarlierClaim {
            draft: &plan,
            status: ClaimStatus::NeedsConfirmation,
        }];
        let mut went = draft(
            "My first pottery class was fun",
            &[],
            ClaimStatus::Active,
            false,
        );
        went.terms = ["pottery class".to_string()].into();
        assert!(matches!(
            j.judge(&went, &earlier),
            Judgement::Revise { target: 0, .. }
        ));
        let park = draft(
            "I went to the park with the kids",
            &[("activity_location", "park")],
            ClaimStatus::Active,
            false,
        );
        let earlier = [EarlierClaim {
            draft: &park,
            status: ClaimStatus::Active,
        }];
        let beach = draft(
            "I went to the beach with the kids",
            &[("activity_location", "beach")],
            ClaimStatus::Active,
            false,
        );
        assert!(
            matches!(j.judge(&beach, &earlier), Judgement::Add { .. }),
            "places visited accumulate"
        );
    }
}
