//! The rule tables of the deterministic extractor. Every word list lives here, as data, so the
//! rules can be read and changed in one place. Nothing here names a person, a place or a phrase
//! of any particular conversation.

/// Words too common to be keywords.
pub const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "ah", "all", "also", "am", "an", "and",
    "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between",
    "both", "but", "by", "can", "could", "did", "do", "does", "doing", "done", "down", "during",
    "each", "even", "ever", "every", "few", "for", "from", "further", "get", "gets", "getting",
    "got", "gonna", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "hey",
    "hi", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
    "just", "let", "like", "lot", "lots", "made", "make", "many", "me", "more", "most", "much",
    "my", "myself", "no", "nor", "not", "now", "of", "off", "oh", "ok", "okay", "on", "once", "one",
    "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "really", "same",
    "she", "should", "so", "some", "such", "sure", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "thing", "things", "this", "those", "through",
    "to", "too", "totally", "under", "until", "up", "us", "very", "was", "way", "we", "well",
    "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with",
    "would", "wow", "yeah", "yes", "yet", "you", "your", "yours", "yourself", "yourselves", "im",
    "ive", "youre", "its", "thats", "dont", "didnt", "cant", "wont", "isnt", "ill", "id", "youve",
    "weve", "theyre", "lately", "recently", "definitely", "actually", "always", "never", "still",
    "though", "since", "maybe", "something", "anything", "everything", "someone", "anyone",
    "everyone", "said", "say", "says", "tell", "told", "know", "think", "thought", "feel", "felt",
    "want", "wanted", "going", "go", "went", "come", "came", "see", "saw", "look", "looks",
    "looking", "great", "good", "nice", "glad", "awesome", "amazing", "cool", "thanks", "thank",
    "love", "loved", "time", "day", "really", "pretty", "kind",
];

/// Informative-looking words that say little about which memory a statement belongs to; sharing
/// only these is no reason to continue a trajectory (SPEC §7 "specific term").
pub const GENERIC_TERMS: &[&str] = &[
    "activity", "event", "home", "people", "place", "plan", "project", "support", "update", "work",
    "life", "family", "friend", "friends", "fun", "experience", "stuff", "today", "week", "year",
    "month", "weekend", "moment", "hope", "idea", "news", "part", "new", "old", "big", "little",
    "lot", "best", "happy", "excited", "proud", "hard", "tough", "world", "way", "thing", "things",
    "photo", "picture", "pic", "help", "talk", "chat", "yesterday", "tomorrow", "ago", "last",
    "next", "first", "time", "times", "start", "started", "keep", "take", "try", "trying",
];

/// Lower-case words that join the capitalised words of one name: "Rio de Janeiro", "Bank of
/// America", "Lord of the Rings" ("the" only after "of").
pub const NAME_CONNECTORS: &[&str] = &[
    "da", "das", "de", "del", "della", "der", "di", "do", "dos", "du", "la", "le", "of", "van", "von", "y",
];

/// Title-Case tokens that never start or belong to an entity: function words, greetings,
/// fillers, pronouns, weekdays and months.
pub const NON_ENTITY: &[&str] = &[
    "a", "an", "and", "the", "of", "in", "on", "at", "to", "for", "with", "by", "from", "but", "or",
    "so", "if", "as", "is", "it", "its", "i", "im", "i'm", "i've", "i'd", "i'll", "me", "my", "you",
    "your", "he", "she", "we", "they", "them", "his", "her", "our", "their", "this", "that",
    "these", "those", "there", "here", "what", "when", "where", "which", "who", "why", "how", "hey",
    "hi", "hello", "wow", "oh", "ah", "yeah", "yes", "no", "ok", "okay", "thanks", "thank",
    "congrats", "congratulations", "sure", "great", "good", "nice", "cool", "awesome", "amazing",
    "sounds", "glad", "sorry", "haha", "lol", "omg", "well", "just", "also", "really", "totally",
    "definitely", "absolutely", "anyway", "btw", "bye", "take", "keep", "let", "do", "did", "does",
    "have", "has", "had", "was", "were", "are", "be", "been", "can", "could", "would", "should",
    "will", "not", "all", "any", "some", "one", "two", "monday", "tuesday", "wednesday", "thursday",
    "friday", "saturday", "sunday", "january", "february", "march", "april", "may", "june", "july",
    "august", "september", "october", "november", "december", "today", "yesterday", "tomorrow",
    "mom", "dad", "mum", "guess", "speaking", "anyways", "after", "before", "since", "then", "now",
    "once", "while", "because", "though", "although", "plus", "like", "love", "see", "look",
    "check", "happy", "hope", "wish", "bet",
];

/// Weekday names, lower case, Monday first.
pub const WEEKDAYS: [&str; 7] = [
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
];

/// Month names, lower case, January first.
pub const MONTHS: [&str; 12] = [
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
];

/// Number words and their values.
pub const NUMBER_WORDS: &[(&str, i64)] = &[
    ("a", 1), ("an", 1), ("one", 1), ("two", 2), ("three", 3), ("four", 4),
    ("five", 5), ("six", 6), ("seven", 7), ("eight", 8), ("nine", 9), ("ten", 10), ("eleven", 11),
    ("twelve", 12), ("couple", 2), ("few", 3), ("several", 3),
];

/// Items that are kept as exact terms wherever they occur, by family.
pub const ITEM_FAMILIES: &[(&str, &[&str])] = &[
    ("instrument", &["piano", "guitar", "violin", "drums", "drum", "flute", "clarinet", "saxophone",
        "cello", "ukulele", "trumpet", "harp", "bass", "keyboard"]),
    ("pet", &["dog", "dogs", "cat", "cats", "puppy", "kitten", "hamster", "parrot", "rabbit",
        "bunny", "turtle", "horse", "fish", "guinea pig", "snake", "bird"]),
    ("activity", &["painting", "pottery", "hiking", "running", "swimming", "camping", "cooking",
        "baking", "yoga", "dancing", "reading", "writing", "gardening", "photography", "surfing",
        "skiing", "climbing", "cycling", "biking", "fishing", "knitting", "meditation",
        "volunteering", "kayaking", "skateboarding", "snowboarding", "drawing", "sculpting",
        "singing", "gaming", "chess", "tennis", "soccer", "basketball", "football", "baseball",
        "golf", "marathon", "workout", "journaling", "woodworking", "sewing", "calligraphy"]),
    ("event", &["competition", "contest", "race", "campaign", "conference", "workshop", "program",
        "speech", "talk", "road trip", "parade", "museum", "exhibit", "exhibition", "fair",
        "festival", "concert", "wedding", "party", "recital", "tournament", "class", "course",
        "meetup", "retreat", "camp", "show", "game", "marathon", "charity run", "fundraiser",
        "protest", "ceremony", "graduation", "interview", "audition", "trip", "vacation", "picnic",
        "pride", "support group", "seminar", "convention", "hackathon"]),
    ("food", &["cake", "pie", "bread", "soup", "cookies", "cookie", "pizza", "pasta", "salad",
        "curry", "tacos", "sushi", "muffins", "cupcakes", "pancakes", "lasagna", "stew", "smoothie",
        "brownies", "chili", "ramen", "burger"]),
    ("writing", &["book", "books", "novel", "poem", "poems", "story", "stories", "blog", "essay",
        "journal", "article", "song", "songs", "letter"]),
    ("game", &["board game", "video game", "puzzle", "chess", "card game"]),
    ("place", &["beach", "park", "lake", "mountains", "mountain", "forest", "city", "museum",
        "library", "gym", "studio", "cafe", "restaurant", "church", "school", "university",
        "hospital", "shelter", "zoo", "garden", "river", "island", "countryside", "farm"]),
    ("organisation", &["company", "startup", "nonprofit", "charity", "band", "team", "club",
        "organization", "organisation", "store", "shop", "business"]),
    ("person", &["husband", "wife", "son", "daughter", "kids", "children", "mother", "father",
        "mom", "dad", "sister", "brother", "grandma", "grandpa", "grandmother", "grandfather",
        "friend", "boyfriend", "girlfriend", "partner", "cousin", "aunt", "uncle", "niece",
        "nephew", "mentor", "boss", "coworker", "colleague", "neighbor", "neighbour"]),
];

/// Verbs after which a Title-Case run or a noun phrase names a place.
pub const PLACE_CUES: &[&str] = &[
    "went to", "moved to", "moved from", "visited", "returned to", "traveled to", "travelled to",
    "trip to", "flew to", "back from", "live in", "lives in", "living in", "grew up in", "from",
    "in", "to",
];

/// Verbs after which a span names a book or other title.
pub const TITLE_CUES: &[&str] = &[
    "read", "reading", "finished", "wrote", "writing", "watched", "watching", "called", "titled",
    "named",
];

/// Verbs after which a span names something signed up for or taken.
pub const ENROL_CUES: &[&str] = &[
    "signed up for", "joined", "enrolled in", "took", "taking", "attend", "attended", "attending",
    "participated in", "volunteered at", "volunteering at",
];

/// Words that end a surface: it is cut before them (trailing time phrases and clauses).
pub const SURFACE_STOPS: &[&str] = &[
    "yesterday", "today", "tomorrow", "last", "next", "this", "that", "which", "who", "because",
    "and", "but", "so", "when", "while", "with", "for", "since", "ago", "on", "at", "to", "it",
    "or", "was", "is", "were", "are", "had", "has", "recently", "lately", "again", "too", "in",
    "from", "as", "about", "after", "before", "during", "now", "then", "if", "few", "couple",
    "several", "bit", "lot",
];

/// Facet tags that hold one value at a time: a new value revises the old one. Other tags (places
/// visited, relationships, pets, preferences) accumulate values.
pub const SINGLE_VALUED_FACETS: &[&str] = &["home_country", "home_city", "occupation", "study_field"];

/// Relation patterns that yield facets: (cue, facet tag). The facet value is the span after the
/// cue (a Title-Case run, an item or a noun phrase).
pub const FACET_PATTERNS: &[(&str, &str)] = &[
    ("moved from", "home_country"), ("i'm from", "home_country"),
    ("i am from", "home_country"), ("grew up in", "home_country"),
    ("my home country", "home_country"), ("moved to", "home_city"), ("live in", "home_city"),
    ("living in", "home_city"), ("work as a", "occupation"), ("work as an", "occupation"),
    ("working as a", "occupation"), ("job as a", "occupation"), ("i'm a", "occupation"),
    ("i am a", "occupation"), ("career in", "career_interest"), ("study", "study_field"),
    ("studying", "study_field"), ("degree in", "study_field"),
    ("volunteer at", "activity_location"), ("volunteering at", "activity_location"),
    ("went to the", "activity_location"), ("went to", "activity_location"),
    ("visited", "activity_location"), ("signed up for", "event_type"), ("joined a", "event_type"),
    ("joined the", "event_type"), ("attended a", "event_type"), ("attended the", "event_type"),
    ("went to a", "event_type"), ("my husband", "relationship"), ("my wife", "relationship"),
    ("my partner", "relationship"), ("my boyfriend", "relationship"),
    ("my girlfriend", "relationship"), ("my kids", "relationship"), ("my son", "relationship"),
    ("my daughter", "relationship"), ("my mom", "relationship"), ("my dad", "relationship"),
    ("my sister", "relationship"), ("my brother", "relationship"), ("my friend", "relationship"),
    ("my dog", "pet"), ("my cat", "pet"), ("my pet", "pet"), ("my puppy", "pet"),
    ("my favorite", "preference"), ("my favourite", "preference"), ("i love", "preference"),
    ("i enjoy", "preference"), ("into", "preference"),
];

/// Cues that a statement is tentative (a wish, a hedge, a plan not yet made): its claim needs
/// confirmation. A plan stated as decided ("I'm going to", "I'm planning to") is a fact about
/// the speaker's plans, and active.
pub const UNCERTAIN_CUES: &[&str] = &[
    "thinking about", "thinking of", "might", "maybe", "hoping to", "hope to", "want to",
    "wanna", "would like to", "considering", "someday", "one day", "not sure", "probably",
    "perhaps",
];

/// Cues that a statement withdraws or cancels something said before.
pub const CANCEL_CUES: &[&str] = &[
    "cancelled", "canceled", "called off", "no longer", "not anymore", "anymore", "gave up", "quit",
    "stopped", "changed my mind", "instead of", "instead", "postponed", "moved the", "broke up",
    "sold",
];

/// Cues that a sentence lists items.
pub const LIST_CUES: &[&str] = &[
    "include", "includes", "including", "enjoys", "enjoy", "plays", "play", "such as", "like",
];

/// Greetings and fillers: sentences made only of these carry no claim.
pub const FILLER: &[&str] = &[
    "hey", "hi", "hello", "wow", "thanks", "thank", "you", "so", "much", "great", "good", "nice",
    "cool", "awesome", "amazing", "congrats", "congratulations", "sounds", "glad", "yeah", "yes",
    "no", "ok", "okay", "sure", "haha", "lol", "bye", "see", "ya", "later", "take", "care", "oh",
    "that's", "thats", "it's", "its", "really", "so", "too", "me", "i", "am", "to", "hear", "love",
    "it", "that", "is", "what", "a", "the", "how", "are", "about", "totally", "agree", "true",
    "right", "absolutely", "definitely", "awww", "aww", "omg", "lovely", "beautiful", "wonderful",
    "fantastic", "incredible", "cute", "sweet", "again", "catch", "up", "talk", "soon", "have",
    "fun", "luck", "best", "of", "and", "was", "this", "those", "these", "them", "they", "look",
    "looks", "such", "an", "you're", "youre", "welcome", "happy", "for", "hope", "well", "doing",
];

/// Whether `word` (lower case) is in `table`.
pub fn contains(table: &[&str], word: &str) -> bool {
    table.contains(&word)
}

/// The item family of a lower-case word or phrase, if any.
pub fn item_family(term: &str) -> Option<&'static str> {
    ITEM_FAMILIES
        .iter()
        .find(|(_, items)| items.contains(&term))
        .map(|(family, _)| *family)
}
