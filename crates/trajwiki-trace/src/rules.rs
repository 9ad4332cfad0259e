//! The deterministic compiler's rules, as data: which actions are the agent's own reasoning,
//! which observations say an action changed nothing, which finishing actions end a run, and which
//! run metadata name the task's family. Add an environment by extending these tables.

/// Action verbs that are the agent talking to itself; the environment answers them with a
/// placeholder ("OK.") and they change nothing.
pub const REASONING_VERBS: &[&str] = &["think", "thought", "reason", "plan", "reflect"];

/// Observations (compared case-insensitively after trimming) that say an action had no effect.
/// An observation that *starts* with one of these counts too.
pub const NO_EFFECT_OBSERVATIONS: &[&str] = &[
    "nothing happens",
    "invalid action",
    "invalid",
    "you can't",
    "you cannot",
    "i don't understand",
    "error:",
    "not a valid",
];

/// Actions (compared case-insensitively) that finish a run: a purchase, an answer, a declaration.
/// Matched against the whole action and against its verb.
pub const FINISHING_ACTIONS: &[&str] =
    &["click[buy now]", "finish", "answer", "submit", "impossible"];

/// Run metadata keys whose value names the family of a task (ALFWorld's `task_type`, PlanCraft's
/// `target`), in order of preference; an insight applies to runs of the same family.
pub const FAMILY_KEYS: &[&str] = &["task_type", "family", "category", "target"];

/// Run metadata keys whose value names the environment.
pub const ENV_KEYS: &[&str] = &["env", "environment"];

/// Run metadata keys whose `true` says the task cannot be solved (PlanCraft's `impossible`).
pub const IMPOSSIBLE_KEYS: &[&str] = &["impossible"];

/// A step is a loop when the same effective action recurs at least this many times in a run.
pub const LOOP_REPEATS: usize = 2;

/// Key actions quoted in a diagnosis at most.
pub const MAX_KEY_ACTIONS: usize = 10;

/// Characters of an action or observation quoted in a diagnosis or an insight at most.
pub const QUOTE_CHARS: usize = 80;

/// Words that carry no requirement when a task is checked against what the run saw.
pub const STOPWORDS: &[&str] = &[
    "a", "about", "also", "an", "and", "any", "are", "as", "at", "be", "but", "by", "can", "do",
    "for", "from", "get", "has", "have", "i", "i'm", "im", "in", "into", "is", "it", "its", "let",
    "like", "looking", "me", "my", "need", "of", "on", "one", "or", "please", "price", "some",
    "than", "that", "the", "them", "then", "there", "these", "this", "to", "too", "type", "under",
    "up", "want", "was", "we", "which", "will", "with", "would", "you", "your", "lower", "dollars",
    "item", "craft", "put", "find", "buy", "go", "make",
];
