//! Every constant of memory construction in one place: defaults, a TOML file, echoed by
//! `trajwiki stats --json`.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Weights and thresholds of memory construction (SPEC §2, §7). Field names are the TOML keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Maximum snapshots per trajectory (m); a full trajectory is continued by a new linked one.
    pub max_trajectory_len: usize,
    /// Maximum candidate trajectories considered per snapshot after the lexical prefilter.
    pub prefilter_cap: usize,
    /// The paper's continuation threshold δ on g, for an LLM making the final call.
    pub delta: f32,
    /// The threshold on g used by the deterministic matcher, calibrated for the embedding model
    /// in use (see `BENCHMARKS.md`); continuation also needs the lexical gate below.
    pub delta_deterministic: f32,
    /// Deterministic continuation needs a trajectory whose latest snapshot is at most this many
    /// sessions back.
    pub max_session_gap: u32,
    /// A late exchange (its session behind the latest seen) also looks for the open
    /// trajectories whose latest snapshot is at most this many sessions before its own, though
    /// they left the live window (see `fold`). A configuration stored before this setting
    /// existed reads as the default: a history that arrived in time order never takes this path.
    #[serde(default = "default_late_session_gap")]
    pub late_session_gap: u32,
    /// Weight of cos(e, e_sum(T)) in g.
    pub w_cos_summary: f32,
    /// Weight of cos(e, e_latest(T)) in g.
    pub w_cos_latest: f32,
    /// Weight of Jaccard(K, K_T) in g.
    pub w_jaccard: f32,
    /// b_entity: bonus when normalised entity keys overlap.
    pub b_entity: f32,
    /// b_facet for an exact facet value overlap.
    pub b_facet_value: f32,
    /// b_facet for a facet tag overlap.
    pub b_facet_tag: f32,
    /// b_cont per shared specific term.
    pub b_cont_per_term: f32,
    /// Cap of b_cont.
    pub b_cont_max: f32,
    /// p_mismatch when only a broad entity is shared and no specific term.
    pub p_broad_only: f32,
    /// p_mismatch when words overlap without a specific term.
    pub p_words_only: f32,
    /// Earlier claims compared with an unmatched new claim.
    pub evolution_candidates: usize,
    /// Trajectories per section: a page is cut into sections of this many, in the order they
    /// joined it (a new trajectory changes only the last section).
    pub page_target: usize,
    /// A keyword that more trajectories than this share is too broad to be a topic.
    pub topic_max_trajectories: usize,
    /// A keyword makes a topic page when at least this many trajectories have it as their
    /// primary topic.
    pub topic_min_trajectories: usize,
    /// A trajectory is list-like (inventory) with at least this many item terms.
    pub inventory_min_items: usize,
    /// An entity enters the namespace lexicon when its Title-Case run occurs this often.
    pub entity_min_count: usize,
    /// Surfaces (terms) are capped at this many tokens.
    pub max_surface_tokens: usize,
    /// The layout of the Memory Wiki and of the fold state it is derived from: 2 is one page per
    /// thing, cut into sections, claims on their subject's page (issue 50). A memory stored with
    /// an earlier layout (its configuration has no `wiki_layout`, read as 1) is stale: `rebuild`
    /// makes it again.
    #[serde(default = "earlier_wiki_layout")]
    pub wiki_layout: u32,
}

/// The layout a configuration stored before [`MemoryConfig::wiki_layout`] existed describes.
fn earlier_wiki_layout() -> u32 {
    1
}

/// The wiki layout this build writes.
pub const WIKI_LAYOUT: u32 = 2;

/// [`MemoryConfig::late_session_gap`]'s default.
fn default_late_session_gap() -> u32 {
    2
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            max_trajectory_len: 15,
            prefilter_cap: 32,
            delta: 0.72,
            delta_deterministic: 0.40,
            max_session_gap: 2,
            late_session_gap: default_late_session_gap(),
            w_cos_summary: 0.60,
            w_cos_latest: 0.20,
            w_jaccard: 0.20,
            b_entity: 0.08,
            b_facet_value: 0.06,
            b_facet_tag: 0.03,
            b_cont_per_term: 0.04,
            b_cont_max: 0.14,
            p_broad_only: 0.10,
            p_words_only: 0.04,
            evolution_candidates: 3,
            page_target: 4,
            topic_max_trajectories: 30,
            topic_min_trajectories: 3,
            inventory_min_items: 2,
            entity_min_count: 2,
            max_surface_tokens: 6,
            wiki_layout: WIKI_LAYOUT,
        }
    }
}

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read configuration {path}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML for [`MemoryConfig`].
    #[error("invalid configuration {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong (from the TOML parser: line, column, key).
        message: String,
    },
}

impl MemoryConfig {
    /// Reads a TOML file; keys left out keep their defaults, unknown keys are errors.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let config = MemoryConfig::from_toml(&text).map_err(|e| ConfigError::Invalid {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        config.validate().map_err(|message| ConfigError::Invalid {
            path: path.display().to_string(),
            message,
        })?;
        Ok(config)
    }

    /// A configuration in TOML: the settings it names, the defaults elsewhere (the wiki layout
    /// is this build's unless it names one).
    pub fn from_toml(text: &str) -> Result<MemoryConfig, toml::de::Error> {
        let mut table: toml::Table = toml::from_str(text)?;
        table
            .entry("wiki_layout")
            .or_insert(toml::Value::Integer(WIKI_LAYOUT.into()));
        MemoryConfig::deserialize(table)
    }

    /// Checks the values make sense together.
    pub fn validate(&self) -> Result<(), String> {
        // Every weight, bonus, penalty and threshold is a finite number from 0 to 1: NaN would
        // make every comparison false and silently change what is built.
        let unit = [
            ("delta", self.delta),
            ("delta_deterministic", self.delta_deterministic),
            ("w_cos_summary", self.w_cos_summary),
            ("w_cos_latest", self.w_cos_latest),
            ("w_jaccard", self.w_jaccard),
            ("b_entity", self.b_entity),
            ("b_facet_value", self.b_facet_value),
            ("b_facet_tag", self.b_facet_tag),
            ("b_cont_per_term", self.b_cont_per_term),
            ("b_cont_max", self.b_cont_max),
            ("p_broad_only", self.p_broad_only),
            ("p_words_only", self.p_words_only),
        ];
        for (key, value) in unit {
            if !(0.0..=1.0).contains(&value) {
                return Err(format!("{key} must be a number from 0 to 1, not {value}"));
            }
        }
        if self.max_trajectory_len == 0 {
            return Err("max_trajectory_len must be at least 1".into());
        }
        if self.page_target == 0 {
            return Err("page_target must be at least 1".into());
        }
        if self.wiki_layout != WIKI_LAYOUT {
            return Err(format!(
                "wiki_layout must be {WIKI_LAYOUT} (the layout this build writes), not {}",
                self.wiki_layout
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_partial_and_unknown_keys() {
        let c = MemoryConfig::from_toml("max_trajectory_len = 10").unwrap();
        assert_eq!(c.max_trajectory_len, 10);
        assert_eq!(c.prefilter_cap, 32);
        assert_eq!(c.validate(), Ok(()));
        assert!(MemoryConfig::from_toml("max_len = 10").is_err());
        // A stored configuration without a layout is of the layout before it existed.
        let stored: MemoryConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(stored.wiki_layout, 1);
        assert!(MemoryConfig::from_toml("wiki_layout = 1")
            .unwrap()
            .validate()
            .is_err());
        let round: MemoryConfig =
            toml::from_str(&toml::to_string(&MemoryConfig::default()).unwrap()).unwrap();
        assert_eq!(round, MemoryConfig::default());
        assert_eq!(MemoryConfig::default().validate(), Ok(()));
        for bad in [
            "delta = nan",
            "w_jaccard = inf",
            "b_entity = -0.5",
            "delta = 1.5",
        ] {
            let c = MemoryConfig::from_toml(bad).unwrap();
            let err = c.validate().unwrap_err();
            assert!(err.contains("from 0 to 1"), "{bad}: {err}");
        }
    }
}
