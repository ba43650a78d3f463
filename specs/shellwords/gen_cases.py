#!/usr/bin/env python3
"""Generates cases.jsonl for the shellwords task.

The oracle is Python's own shlex.split(line) (POSIX mode, comments=False).
Deterministic: hand-picked cases in a fixed order, then seeded random strings.
Run from this folder with Python 3.11:  python3 gen_cases.py > cases.jsonl
"""
import json
import random
import shlex
import sys

assert sys.version_info[:2] == (3, 11), "expected values were generated with Python 3.11"


def oracle(line):
    try:
        return shlex.split(line)  # posix=True, comments=False
    except ValueError:
        return None


HAND = [
    # plain words and whitespace
    ("empty_line", ""),
    ("only_spaces", "   "),
    ("only_mixed_whitespace", " \t\r\n \t"),
    ("single_word", "hello"),
    ("two_words", "hello world"),
    ("three_words", "ls -la /tmp"),
    ("run_of_spaces", "a    b"),
    ("tab_separator", "a\tb"),
    ("newline_separator", "a\nb"),
    ("cr_separator", "a\rb"),
    ("crlf_separator", "a\r\nb"),
    ("mixed_whitespace_run", "a \t\r\n b\t\tc"),
    ("leading_whitespace", "   a b"),
    ("trailing_whitespace", "a b   "),
    ("leading_and_trailing_tabs", "\t\ta\tb\t\t"),
    ("punctuation_is_word", "a;b|c&d>e<f"),
    ("punctuation_separate", "echo ; ls | wc > out"),
    ("dollar_not_expanded", "echo $HOME ${x} $(pwd)"),
    ("glob_not_expanded", "ls *.rs ?x [ab]"),
    ("tilde_not_expanded", "cd ~ ~/src"),
    ("equals_in_word", "FOO=bar baz=qux"),
    # not-ASCII whitespace is part of a word
    ("vertical_tab_is_word_char", "a\x0bb c"),
    ("form_feed_is_word_char", "a\x0cb c"),
    ("nbsp_is_word_char", "a\u00a0b c"),
    ("ideographic_space_is_word_char", "a\u3000b"),
    # hash is not a comment
    ("hash_alone", "#"),
    ("hash_word", "echo # not a comment"),
    ("hash_inside_word", "a#b #c d#"),
    ("hash_in_quotes", "'#' \"#\""),
    # single quotes
    ("single_quoted_word", "'hello'"),
    ("single_quoted_space", "'hello world'"),
    ("single_quoted_many_spaces", "'  a  b  '"),
    ("single_quoted_backslash", "'a\\b'"),
    ("single_quoted_backslash_end", "'a\\' b"),
    ("single_quoted_double_quote", "'say \"hi\"'"),
    ("single_quoted_tab_newline", "'a\tb\nc'"),
    ("single_quoted_dollar", "'$HOME'"),
    ("single_quotes_two_words", "'a b' 'c d'"),
    # double quotes
    ("double_quoted_word", "\"hello\""),
    ("double_quoted_space", "\"hello world\""),
    ("double_quoted_single_quote", "\"it's\""),
    ("double_quoted_escaped_quote", "\"say \\\"hi\\\"\""),
    ("double_quoted_escaped_backslash", "\"a\\\\b\""),
    ("double_quoted_backslash_letter_kept", "\"a\\nb\""),
    ("double_quoted_backslash_dollar_kept", "\"\\$HOME\""),
    ("double_quoted_backslash_single_quote_kept", "\"\\'\""),
    ("double_quoted_backslash_space_kept", "\"a\\ b\""),
    ("double_quoted_backslash_newline_kept", "\"a\\\nb\""),
    ("double_quoted_backslash_tab_kept", "\"a\\\tb\""),
    ("double_quoted_two_backslashes_then_quote", "\"a\\\\\" b"),
    ("double_quoted_three_backslashes_quote", "\"a\\\\\\\"b\""),
    ("double_quoted_tab_newline", "\"a\tb\nc\""),
    ("double_quoted_hash", "\"# x\""),
    # backslash outside quotes
    ("backslash_space", "a\\ b"),
    ("backslash_space_between_words", "x a\\ b y"),
    ("backslash_letter", "\\a\\b\\c"),
    ("backslash_n_is_n", "a\\nb"),
    ("backslash_backslash", "a\\\\b"),
    ("backslash_single_quote", "it\\'s"),
    ("backslash_double_quote", "say\\\"hi\\\""),
    ("backslash_newline_kept_newline", "a\\\nb"),
    ("backslash_tab", "a\\\tb"),
    ("backslash_hash", "\\#x"),
    ("backslash_at_word_start", "\\ a"),
    ("lone_escaped_space_word", "\\ "),
    ("escaped_backslash_word", "\\\\"),
    ("backslash_before_unicode", "\\é"),
    # adjacent parts join
    ("adjacent_quotes_join", "'a'\"b\"c"),
    ("unquoted_then_single", "abc'def'"),
    ("unquoted_then_double", "abc\"d e\"f"),
    ("quote_in_middle_of_word", "--name='John Smith'"),
    ("escaped_space_then_quote", "a\\ 'b c'"),
    ("many_parts", "a'b'\"c\"\\d'e f'g"),
    # empty quoted words
    ("empty_single_quotes", "''"),
    ("empty_double_quotes", "\"\""),
    ("empty_quotes_between_words", "a '' b"),
    ("two_empty_words", "'' \"\""),
    ("empty_quotes_joined", "''\"\"''"),
    ("empty_quotes_after_word", "a'' b\"\""),
    ("empty_quotes_with_whitespace", "  ''  "),
    ("empty_quotes_trailing", "a ''"),
    ("escaped_quotes_not_empty", "\\'\\'"),
    # errors
    ("unterminated_single", "'abc"),
    ("unterminated_single_after_word", "a 'b c"),
    ("unterminated_double", "\"abc"),
    ("unterminated_double_after_word", "a \"b c"),
    ("unterminated_double_escaped_quote", "\"abc\\\""),
    ("lone_single_quote", "'"),
    ("lone_double_quote", "\""),
    ("three_single_quotes", "'''"),
    ("trailing_backslash", "abc\\"),
    ("lone_backslash", "\\"),
    ("trailing_backslash_after_space", "a \\"),
    ("double_quote_in_single_unterminated", "'\"' \""),
    ("trailing_backslash_in_double_quote", "\"a\\"),
    # unicode
    ("unicode_words", "héllo wörld"),
    ("cjk_words", "日本 語"),
    ("emoji_words", "🦀 rust 🦀🦀"),
    ("unicode_in_single_quotes", "'ü ß'"),
    ("unicode_in_double_quotes", "\"ñ \\\" é\""),
    ("unicode_after_backslash_in_double", "\"\\é\""),
    ("combining_mark", "e\u0301 x"),
    # longer realistic lines
    ("git_commit", "git commit -m \"fix: handle 'quotes' properly\""),
    ("ssh_command", "ssh host 'ls -l \"/var/log\"'"),
    ("find_exec", "find . -name '*.rs' -exec grep -n \"fn main\" {} \\;"),
    ("python_c", "python3 -c 'print(\"a b\")'"),
    ("awk_program", "awk '{ print $1 }' file.txt"),
    ("windows_path", "C:\\\\Users\\\\me \"C:\\\\Program Files\""),
    ("escaped_everything", "\\a\\ \\b\\'\\\""),
    ("long_line", " ".join("w%d" % i for i in range(60))),
]

ALPHABET = ["a", "b", "x", " ", " ", "\t", "\n", "'", "'", '"', '"', "\\", "\\", "#", "é", ";"]


def random_cases(n_ok, n_err, seed=20240611):
    """Seeded random lines over a small alphabet of tricky characters; keeps
    the first n_ok lines that split and the first n_err lines that raise."""
    rng = random.Random(seed)
    seen = set(line for _, line in HAND)
    ok, err = [], []
    while len(ok) < n_ok or len(err) < n_err:
        length = rng.randint(1, 14)
        line = "".join(rng.choice(ALPHABET) for _ in range(length))
        if line in seen:
            continue
        seen.add(line)
        bucket = ok if oracle(line) is not None else err
        limit = n_ok if bucket is ok else n_err
        if len(bucket) < limit:
            bucket.append(line)
    # interleave in a fixed, seeded order
    lines = ok + err
    rng.shuffle(lines)
    return [("random_%02d" % i, line) for i, line in enumerate(lines)]


def main():
    cases = HAND + random_cases(30, 10)
    names = [n for n, _ in cases]
    assert len(names) == len(set(names)), "duplicate case name"
    for name, line in cases:
        rec = {"name": name, "input": line, "expected": oracle(line)}
        sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
