//! Close-match suggestions for names that were not found ("did you mean …?").
//!
//! Owns the one rule every "unknown name" error in the library uses, so that the registry, the
//! typed source and the bridge suggest the same way. It does not decide what a candidate set is.

/// At most this many suggestions are returned.
pub const MAX_SUGGESTIONS: usize = 5;

/// The candidates close to `name`, best first, at most [`MAX_SUGGESTIONS`].
///
/// A candidate is close when, after lowercasing and dropping the separators `_`, `-`, `.` and
/// spaces, it equals `name` (so `Web-Search` finds `web_search`), or when the edit distance between
/// the normalised forms is at most a third of the longer one (at least 1, at most 3).
///
/// ```
/// use toolbridge_tools::suggest::close_matches;
///
/// let names = ["web_search", "calculator", "hash"];
/// assert_eq!(close_matches("WebSearch", names), vec!["web_search"]);
/// assert_eq!(close_matches("calculater", names), vec!["calculator"]);
/// assert!(close_matches("weather", names).is_empty());
/// ```
pub fn close_matches<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let wanted = normalise(name);
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter_map(|candidate| {
            let have = normalise(candidate);
            if have == wanted {
                return Some((0, candidate));
            }
            let longest = wanted.chars().count().max(have.chars().count());
            let allowed = (longest / 3).clamp(1, 3);
            let distance = levenshtein(&wanted, &have);
            // Distance 0 after normalisation was handled above; shift the rest by one so that
            // separator and case variants always rank first.
            (distance <= allowed).then_some((distance + 1, candidate))
        })
        .collect();
    scored.sort_unstable();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, candidate)| candidate.to_owned())
        .collect()
}

fn normalise(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Classic two-row Levenshtein distance over chars.
fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_is_symmetric_and_counts_edits() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("sitting", "kitten"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("same", "same"), 0);
    }

    #[test]
    fn separator_and_case_variants_rank_before_typos() {
        let names = ["file-read", "file_reads", "fileread"];
        let got = close_matches("File_Read", names);
        assert_eq!(got[..2], ["file-read", "fileread"]);
        assert_eq!(got[2], "file_reads");
    }

    #[test]
    fn short_names_allow_one_edit_only() {
        assert_eq!(close_matches("has", ["hash", "id"]), vec!["hash"]);
        assert!(close_matches("ab", ["id"]).is_empty());
    }

    #[test]
    fn suggestions_are_capped() {
        let names: Vec<String> = (0..10).map(|i| format!("tool{i}")).collect();
        let got = close_matches("tool", names.iter().map(String::as_str));
        assert_eq!(got.len(), MAX_SUGGESTIONS);
    }
}
