//! How many of a page's members hold each word, kept between renders of the page.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

/// How many of a page's members hold each word (their keywords, their entities, their items),
/// kept between renders of the page: a member's words are read again only when it changed or
/// joined, and taken out when it left, so that a render of a page of thousands of members
/// reads the words of the few that changed. The counts are those of reading every member's
/// words again.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    /// Each word seen on the page, with its id.
    ids: FxHashMap<Box<str>, u32>,
    /// Per word id, the members that hold it.
    counts: Vec<u32>,
    /// Per member (a trajectory's position), the ids of its words.
    of: FxHashMap<usize, Box<[u32]>>,
}

impl Tally {
    /// Takes the tally to `members` (in order, each once), whose words are `words(member)` (a
    /// word a member gives twice counts twice): those of the members in `changed` or new to the
    /// page are read again, those of the members that left are taken out.
    pub(crate) fn update<'s, W: IntoIterator<Item = &'s str>>(
        &mut self,
        members: &[usize],
        changed: &BTreeSet<usize>,
        words: impl Fn(usize) -> W,
    ) {
        let gone: Vec<usize> = self
            .of
            .keys()
            .copied()
            .filter(|m| members.binary_search(m).is_err())
            .collect();
        for m in gone {
            if let Some(ids) = self.of.remove(&m) {
                self.take(&ids);
            }
        }
        for &m in members {
            if self.of.contains_key(&m) && !changed.contains(&m) {
                continue;
            }
            let ids: Box<[u32]> = words(m).into_iter().map(|w| self.id(w)).collect();
            for &i in &ids {
                self.counts[i as usize] += 1;
            }
            if let Some(old) = self.of.insert(m, ids) {
                self.take(&old);
            }
        }
    }

    /// Each word some member holds, with how many hold it (in no order).
    pub(crate) fn counted(&self) -> impl Iterator<Item = (&str, usize)> {
        self.ids
            .iter()
            .map(|(w, &i)| (&**w, self.counts[i as usize] as usize))
            .filter(|&(_, n)| n > 0)
    }

    fn take(&mut self, ids: &[u32]) {
        for &i in ids {
            self.counts[i as usize] -= 1;
        }
    }

    fn id(&mut self, word: &str) -> u32 {
        if let Some(&i) = self.ids.get(word) {
            return i;
        }
        let i = self.counts.len() as u32;
        self.ids.insert(word.into(), i);
        self.counts.push(0);
        i
    }
}

#[cfg(test)]
mod tests {
    use super::Tally;
    use std::collections::{BTreeMap, BTreeSet};

    fn set(words: &[&str]) -> BTreeSet<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    fn counts(t: &Tally) -> BTreeMap<String, usize> {
        t.counted().map(|(w, n)| (w.to_string(), n)).collect()
    }

    /// What every member's words counted again give.
    fn recounted(states: &[BTreeSet<String>], members: &[usize]) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for &m in members {
            for w in &states[m] {
                *out.entry(w.clone()).or_default() += 1;
            }
        }
        out
    }

    /// Members change, join, leave and come back: the kept counts are those counted again.
    #[test]
    fn a_kept_tally_counts_as_the_members_counted_again() {
        let mut states = vec![
            set(&["garden", "tulip"]),
            set(&["garden"]),
            set(&["lake", "tulip"]),
            set(&[]),
        ];
        let mut tally = Tally::default();
        let none = BTreeSet::new();
        // (members, changed, a member's new words)
        type Step<'a> = (Vec<usize>, Vec<usize>, Option<(usize, &'a [&'a str])>);
        let steps: Vec<Step> = vec![
            (vec![0, 1, 2], vec![], None),
            // Member 1 changed.
            (vec![0, 1, 2], vec![1], Some((1, &["garden", "lake"][..]))),
            // Member 0 left, 3 joined.
            (vec![1, 2, 3], vec![], None),
            // Member 3 changed, 0 came back changed.
            (vec![0, 1, 2, 3], vec![0, 3], Some((3, &["tulip"][..]))),
            (vec![], vec![], None),
            (vec![2], vec![], None),
        ];
        for (members, changed, change) in steps {
            if let Some((m, words)) = change {
                states[m] = set(words);
            }
            if members.contains(&0) && changed.contains(&0) {
                states[0] = set(&["garden", "pond"]);
            }
            let changed: BTreeSet<usize> = changed.into_iter().collect();
            let words = |m: usize| states[m].iter().map(String::as_str);
            tally.update(&members, &changed, words);
            assert_eq!(counts(&tally), recounted(&states, &members), "{members:?}");
            // Nothing changed: the same again.
            tally.update(&members, &none, words);
            assert_eq!(counts(&tally), recounted(&states, &members));
        }
    }
}
