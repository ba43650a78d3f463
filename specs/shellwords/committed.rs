//! Committed candidate of the `shellwords` task.
//!
//! Deliberately imperfect reference: it treats a backslash inside double
//! quotes like one outside (always dropping it), and it drops empty words
//! even when they were quoted (`''`, `""`).

/// Splits a command line into words (POSIX-like quoting, no expansions).
pub fn split_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = line.chars();

    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => current.push(c),
            (_, '\\') => current.push(chars.next()?),
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, ' ' | '\t' | '\r' | '\n') => {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
            }
            (None, c) => current.push(c),
        }
    }

    if quote.is_some() {
        return None;
    }
    if !current.is_empty() {
        words.push(current);
    }
    Some(words)
}
